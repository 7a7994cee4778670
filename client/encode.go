package client

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"lemo/api"
)

// encodable checks that req can be sent: every string field is UTF-8 and
// the encoding succeeds within maxRequestBytes. protoactor drops a message
// it cannot encode without telling the sender, which would then wait for an
// answer that never comes; so anything unsendable is an error here, before
// the send, naming the field ("create_task.request") when it can.
func encodable(req *api.Request) error {
	if field := badUTF8(req.ProtoReflect(), ""); field != "" {
		return fmt.Errorf("%w: %s is not valid UTF-8: only UTF-8 text can be sent to the daemon", ErrInvalid, field)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("%w: the command cannot be encoded: %v", ErrInvalid, err)
	}
	if len(b) > maxRequestBytes {
		return fmt.Errorf("%w: a command of %d bytes exceeds %d bytes", ErrTooLarge, len(b), maxRequestBytes)
	}
	return nil
}

// badUTF8 returns the path of the first string of m (a field, an element
// of a list, a key or value of a map) that is not valid UTF-8, or "".
func badUTF8(m protoreflect.Message, path string) string {
	var found string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && found == ""; i++ {
				found = badValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", name, i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if s, ok := k.Interface().(string); ok && !utf8.ValidString(s) {
					found = name + " (a key)"
				} else {
					found = badValue(fd.MapValue(), mv, fmt.Sprintf("%s[%v]", name, k.Interface()))
				}
				return found == ""
			})
		default:
			found = badValue(fd, v, name)
		}
		return found == ""
	})
	return found
}

func badValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return path
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return badUTF8(v.Message(), path)
	}
	return ""
}

// field is a text field of a command as a person gave it.
type field struct {
	name      string
	value     string
	multiline bool
}

// checkText checks the text fields a person wrote by the daemon's rule
// (api.CheckText), so that a bad one is refused at once, naming it.
func checkText(fields ...field) error {
	for _, f := range fields {
		if err := api.CheckText(f.value, f.multiline); err != nil {
			return fmt.Errorf("%w: %s %v", ErrInvalid, f.name, err)
		}
	}
	return nil
}
