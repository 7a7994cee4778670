package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalJSON encodes m for scripts (docs/json.md): protojson's field
// names (the .proto names) and enum names, populated fields only, but
// 64-bit integers as JSON numbers (protojson writes strings) and bytes
// that hold a JSON object, array, number, true, false or null (tool
// arguments, results, states, schemas) as that JSON (protojson writes
// base64). Other bytes (not JSON, or a JSON string) are base64 strings, so
// a string value of a bytes field always means base64.
// Well-known types (timestamps) are as protojson writes them.
func marshalJSON(m proto.Message) ([]byte, error) {
	var b bytes.Buffer
	if err := writeMessage(&b, m.ProtoReflect()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeMessage(b *bytes.Buffer, m protoreflect.Message) error {
	if strings.HasPrefix(string(m.Descriptor().FullName()), "google.protobuf.") {
		out, err := protojson.Marshal(m.Interface())
		if err != nil {
			return err
		}
		b.Write(out)
		return nil
	}
	type field struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !fd.IsExtension() {
			fields = append(fields, field{fd, v})
		}
		return true
	})
	slices.SortFunc(fields, func(a, b field) int { return int(a.fd.Number()) - int(b.fd.Number()) })
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, string(f.fd.Name()))
		b.WriteByte(':')
		var err error
		switch {
		case f.fd.IsList():
			l := f.v.List()
			b.WriteByte('[')
			for j := 0; j < l.Len() && err == nil; j++ {
				if j > 0 {
					b.WriteByte(',')
				}
				err = writeValue(b, f.fd, l.Get(j))
			}
			b.WriteByte(']')
		case f.fd.IsMap():
			type entry struct {
				k string
				v protoreflect.Value
			}
			var entries []entry
			f.v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				entries = append(entries, entry{k.String(), v})
				return true
			})
			slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.k, b.k) })
			b.WriteByte('{')
			for j, e := range entries {
				if j > 0 {
					b.WriteByte(',')
				}
				writeString(b, e.k)
				b.WriteByte(':')
				if err = writeValue(b, f.fd.MapValue(), e.v); err != nil {
					break
				}
			}
			b.WriteByte('}')
		default:
			err = writeValue(b, f.fd, f.v)
		}
		if err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writeMessage(b, v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			writeString(b, string(ev.Name()))
		} else {
			b.WriteString(strconv.Itoa(int(v.Enum())))
		}
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.StringKind:
		writeString(b, v.String())
	case protoreflect.BytesKind:
		raw := v.Bytes()
		// A JSON string stays base64, so that a string always means
		// base64 and any other value the JSON the bytes hold.
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] != '"' && json.Valid(t) {
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err == nil {
				b.Write(c.Bytes())
				return nil
			}
		}
		writeString(b, base64.StdEncoding.EncodeToString(raw))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			writeString(b, "NaN")
		case math.IsInf(f, 1):
			writeString(b, "Infinity")
		case math.IsInf(f, -1):
			writeString(b, "-Infinity")
		default:
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	out, _ := json.Marshal(s)
	b.Write(out)
}
