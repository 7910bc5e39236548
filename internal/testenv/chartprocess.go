package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ChartProcess is how a chart's Deployment runs its container, read from what
// helm installed, made to run as a local process (there is no container
// runtime here): the container's arguments, with the files it mounts
// (ConfigMaps, Secrets, empty directories) written under a directory of the
// process and their paths in the arguments pointing there, and its environment.
type ChartProcess struct {
	Args []string
	Env  []string
}

// FromDeployment reads the Deployment key's container and writes the volumes
// it mounts under dir.
func FromDeployment(ctx context.Context, c client.Reader, key client.ObjectKey, container, dir string) (*ChartProcess, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, key, d); err != nil {
		return nil, fmt.Errorf("reading the chart's Deployment %s: %w", key, err)
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil, fmt.Errorf("the Deployment %s has no container %s", key, container)
	}
	ctr := d.Spec.Template.Spec.Containers[i]
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		j := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if j < 0 {
			return nil, fmt.Errorf("the Deployment %s mounts a volume %s it does not have", key, m.Name)
		}
		local := filepath.Join(dir, m.Name)
		if err := writeVolume(ctx, c, key.Namespace, d.Spec.Template.Spec.Volumes[j], local); err != nil {
			return nil, err
		}
		mounts[m.MountPath] = local
	}
	p := &ChartProcess{}
	paths := slices.SortedFunc(func(yield func(string) bool) {
		for k := range mounts {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int { return len(b) - len(a) }) // the longest mount path first
	for _, arg := range ctr.Args {
		for _, mp := range paths {
			if strings.Contains(arg, mp+"/") || strings.HasSuffix(arg, mp) {
				arg = strings.Replace(arg, mp, mounts[mp], 1)
				break
			}
		}
		p.Args = append(p.Args, arg)
	}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			p.Env = append(p.Env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			p.Env = append(p.Env, e.Name+"="+key.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			p.Env = append(p.Env, e.Name+"="+key.Name+"-local") // The one local "pod".
		default:
			return nil, fmt.Errorf("the Deployment %s sets %s from a source a local process has no equivalent of", key, e.Name)
		}
	}
	return p, nil
}

// writeVolume writes what volume holds into the directory local.
func writeVolume(ctx context.Context, c client.Reader, namespace string, volume corev1.Volume, local string) error {
	if err := os.MkdirAll(local, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{}
	switch {
	case volume.ConfigMap != nil:
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: volume.ConfigMap.Name}, cm); err != nil {
			return fmt.Errorf("reading ConfigMap %s of volume %s: %w", volume.ConfigMap.Name, volume.Name, err)
		}
		for k, v := range cm.Data {
			files[k] = []byte(v)
		}
	case volume.Secret != nil:
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: volume.Secret.SecretName}, s); err != nil {
			return fmt.Errorf("reading Secret %s of volume %s: %w", volume.Secret.SecretName, volume.Name, err)
		}
		files = s.Data
	case volume.EmptyDir != nil:
	default:
		return fmt.Errorf("volume %s is of a kind a local process has no equivalent of", volume.Name)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(local, name), content, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Set gives the flag the value, in place of what the chart says, or added.
func (p *ChartProcess) Set(flag, value string) {
	arg := "--" + flag + "=" + value
	for i, a := range p.Args {
		if a == "--"+flag || strings.HasPrefix(a, "--"+flag+"=") {
			p.Args[i] = arg
			return
		}
	}
	p.Args = append(p.Args, arg)
}
