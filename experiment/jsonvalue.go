package experiment

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// jsonValue is v as encoding/json would write it, except that a NaN or
// infinite float becomes null: a measurement that did not happen (a
// sample window with no data, a ratio over nothing) must not make the
// whole --json document fail to encode.
func jsonValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Invalid:
		return nil
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		if marshals(v) {
			return v.Interface()
		}
		return jsonValue(v.Elem())
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
		return nil
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = jsonValue(it.Value())
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface()
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = jsonValue(v.Index(i))
		}
		return s
	case reflect.Struct:
		if marshals(v) {
			return v.Interface()
		}
		m := map[string]any{}
		structFields(v, m)
		return m
	}
	return v.Interface()
}

// structFields puts v's exported fields into m under their JSON names,
// flattening untagged embedded structs as encoding/json does.
func structFields(v reflect.Value, m map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" && fv.Kind() == reflect.Struct {
			structFields(fv, m)
			continue
		}
		if strings.Contains(","+opts+",", ",omitempty,") && fv.IsZero() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = jsonValue(fv)
	}
}

// marshals reports whether v encodes itself (time.Time, a Marshaler).
func marshals(v reflect.Value) bool {
	if !v.CanInterface() {
		return false
	}
	switch v.Interface().(type) {
	case json.Marshaler, encoding.TextMarshaler:
		return true
	}
	return false
}
