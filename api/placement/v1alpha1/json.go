package v1alpha1

// JSON is any JSON value (an object, an array, a string, a number, a
// boolean), kept as written: a JSON patch operation's value, a merge patch,
// status feedback. It is the API's own, so that the API needs no Kubernetes
// server package (apiextensions-apiserver's JSON has the same wire form).
type JSON struct {
	// Raw is the value's JSON.
	Raw []byte `json:"-"`
}

// MarshalJSON writes the value as it is.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j.Raw) == 0 {
		return []byte("null"), nil
	}
	return j.Raw, nil
}

// UnmarshalJSON keeps the value as it is; null is no value.
func (j *JSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		j.Raw = nil
		return nil
	}
	j.Raw = append(j.Raw[:0], b...)
	return nil
}
