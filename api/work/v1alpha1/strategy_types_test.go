package v1alpha1

import (
	"strings"
	"testing"
)

func TestApplyStrategyValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		s    ApplyStrategy
		want string // a part of the error; empty for none
	}{
		"the defaults": {s: ApplyStrategy{}.Defaulted()},
		"every policy": {s: ApplyStrategy{Type: ApplyReportOnly, Takeover: TakeoverIfNoDiff, WhenDrifted: DriftReport, DeletionPolicy: DeletionDeleteTakenOver, Claims: ClaimsDelete,
			IgnoreFields: []IgnoreField{{Kind: "Deployment", Paths: []string{"/spec/replicas", "/metadata/annotations/example.com~1rev"}}}}},
		"an unknown type":             {s: ApplyStrategy{Type: "Replace"}.Defaulted(), want: `unknown apply strategy type "Replace"`},
		"an unknown takeover":         {s: ApplyStrategy{Takeover: "Sometimes"}.Defaulted(), want: `unknown takeover policy "Sometimes"`},
		"an unknown drift policy":     {s: ApplyStrategy{WhenDrifted: "Ignore"}.Defaulted(), want: `unknown drift policy "Ignore"`},
		"an unknown deletion policy":  {s: ApplyStrategy{DeletionPolicy: "Keep"}.Defaulted(), want: `unknown deletion policy "Keep"`},
		"an unknown claim policy":     {s: ApplyStrategy{Claims: "Snapshot"}.Defaulted(), want: `unknown claim policy "Snapshot"`},
		"not defaulted":               {s: ApplyStrategy{}, want: `unknown apply strategy type ""`},
		"a path without a slash":      {s: ApplyStrategy{IgnoreFields: []IgnoreField{{Kind: "Deployment", Paths: []string{"spec.replicas"}}}}.Defaulted(), want: "must start with /"},
		"an empty key":                {s: ApplyStrategy{IgnoreFields: []IgnoreField{{Kind: "Deployment", Paths: []string{"/spec//replicas"}}}}.Defaulted(), want: "empty key"},
		"a bare tilde":                {s: ApplyStrategy{IgnoreFields: []IgnoreField{{Kind: "Deployment", Paths: []string{"/metadata/a~b"}}}}.Defaulted(), want: "~ is escaped"},
		"an ignore rule without kind": {s: ApplyStrategy{IgnoreFields: []IgnoreField{{Paths: []string{"/spec"}}}}.Defaulted(), want: "kind and paths are required"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
