package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"

	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// TunnelProviders writes in dir a consumer's access provider file for the
// lodestar-tunnel provider, whose plugin (the lodestar-credentials binary)
// reads the consumer's hub token from a file there, and reads it as a
// cluster-inventory-api consumer does.
func TunnelProviders(dir, plugin, token string) (*access.Config, error) {
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"providers": []any{map[string]any{
		"name": placementv1alpha1.TunnelProvider,
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "args": []string{"--token-file", tokenFile}, "provideClusterInfo": true,
		},
	}}})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	return access.NewFromFile(path)
}
