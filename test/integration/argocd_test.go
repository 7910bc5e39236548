package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// argoHealthScripts are the health checks docs/examples/hub-tools/argocd-cm.yaml
// gives Argo CD, by kind.
func argoHealthScripts() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "hub-tools", "argocd-cm.yaml"))
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kind := range []string{"Placement", "ClusterPlacement"} {
		out[kind] = cm.Data["resource.customizations.health.placement.lodestar.dev_"+kind]
	}
	return out, nil
}

// argoHealth runs an Argo CD health script on obj as Argo CD runs one: in
// gopher-lua with only the base and table libraries, the object as the
// global obj (maps and lists as tables, numbers as numbers), one second at
// most; the script returns a table with status and message.
func argoHealth(script string, obj *unstructured.Unstructured) (status, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return "", "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String(), nil
}

// toLua is v as a Lua value.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	}
	return lua.LNil
}
