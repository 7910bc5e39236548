package overrides

import (
	"encoding/json"
	"slices"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// podSpecs are where the kinds Lodestar places keep a pod spec: Deployments,
// StatefulSets, DaemonSets, ReplicaSets, Jobs and ReplicationControllers (and
// custom kinds shaped alike) under spec.template, CronJobs one level deeper.
var podSpecs = [][]string{
	{"spec", "template", "spec"},
	{"spec", "jobTemplate", "spec", "template", "spec"},
}

// replaceImages changes the images of the containers and init containers of
// doc's pod spec; a document without one is returned as it is.
func replaceImages(doc []byte, o *placementv1alpha1.ImageOverride) ([]byte, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	changed := false
	for _, path := range podSpecs {
		spec, ok := nested(obj, path)
		if !ok {
			continue
		}
		for _, list := range []string{"initContainers", "containers"} {
			containers, _ := spec[list].([]any)
			for _, c := range containers {
				container, ok := c.(map[string]any)
				if !ok {
					continue
				}
				name, _ := container["name"].(string)
				image, ok := container["image"].(string)
				if !ok || (len(o.Containers) > 0 && !slices.Contains(o.Containers, name)) {
					continue
				}
				if replaced := ReplaceImage(image, o); replaced != image {
					container["image"], changed = replaced, true
				}
			}
		}
	}
	if !changed {
		return doc, nil
	}
	return json.Marshal(obj)
}

func nested(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// ReplaceImage replaces the parts of image ([registry/]repository[:tag][@digest])
// that o sets. The first path component is the registry when it has a dot or a
// port, or is localhost; an image without one gets o.Registry in front. A new
// tag drops the digest.
func ReplaceImage(image string, o *placementv1alpha1.ImageOverride) string {
	rest, digest := image, ""
	if i := strings.Index(rest, "@"); i >= 0 {
		rest, digest = rest[:i], rest[i:]
	}
	tag := ""
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		rest, tag = rest[:i], rest[i+1:]
	}
	registry := ""
	if i := strings.Index(rest, "/"); i >= 0 {
		if first := rest[:i]; strings.ContainsAny(first, ".:") || first == "localhost" {
			registry, rest = first, rest[i+1:]
		}
	}
	repository := rest
	if o.Registry != "" {
		registry = o.Registry
	}
	if o.Repository != "" {
		repository = o.Repository
	}
	if o.Tag != "" {
		tag, digest = o.Tag, ""
	}
	out := repository
	if registry != "" {
		out = registry + "/" + out
	}
	if tag != "" {
		out += ":" + tag
	}
	return out + digest
}
