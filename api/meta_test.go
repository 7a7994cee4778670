package api

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fill sets every field of m, recursively, to a value that is not its
// zero, so a copy that leaves a field out differs from m.
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList() || fd.IsMap():
			panic(fmt.Sprintf("fill: %s: lists and maps are not filled; extend fill", fd.FullName()))
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 3 {
				sub := m.NewField(fd).Message()
				fill(sub, depth+1)
				m.Set(fd, protoreflect.ValueOfMessage(sub))
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(string(fd.Name())))
		case fd.Kind() == protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(true))
		case fd.Kind() == protoreflect.EnumKind:
			m.Set(fd, protoreflect.ValueOfEnum(1))
		case fd.Kind() == protoreflect.Uint32Kind:
			m.Set(fd, protoreflect.ValueOfUint32(uint32(fd.Number())))
		case fd.Kind() == protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(uint64(fd.Number())))
		case fd.Kind() == protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(int32(fd.Number())))
		case fd.Kind() == protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(int64(fd.Number())))
		case fd.Kind() == protoreflect.DoubleKind:
			m.Set(fd, protoreflect.ValueOfFloat64(float64(fd.Number())))
		default:
			panic(fmt.Sprintf("fill: %s: kind %v is not filled; extend fill", fd.FullName(), fd.Kind()))
		}
	}
}

// The fold's copy of a Task's metadata holds every field (a field added to
// TaskMeta or BudgetSummary and not to foldCopy fails here), and folding
// into it never changes the metadata it was made from, whatever the event.
func TestFoldCopyIsWholeAndApart(t *testing.T) {
	m := &TaskMeta{}
	fill(m.ProtoReflect(), 0)
	if c := foldCopy(m); !proto.Equal(c, m) {
		t.Fatalf("foldCopy(m) = %v, want m = %v", c, m)
	}
	if c := FoldCopyBudget(m.Budget); !proto.Equal(c, m.Budget) {
		t.Fatalf("FoldCopyBudget(b) = %v, want b = %v", c, m.Budget)
	}
	if FoldCopyBudget(nil) != nil {
		t.Fatal("FoldCopyBudget(nil) is not nil")
	}
	now := timestamppb.Now()
	for _, body := range []proto.Message{
		&BudgetCharged{Tokens: 5, CostNanoUsd: 7, Estimated: true},
		&BudgetRaised{Add: &BudgetAmounts{Tokens: 1, CostNanoUsd: 1, TimeMs: 1}},
		&CycleStarted{Cycle: 9, Reservation: &BudgetReservation{InputTokens: 3}},
		&CycleFinished{Cycle: 4, Usage: &Usage{PromptTokens: 2, CompletionTokens: 3}},
		&StatusChanged{Status: TaskStatus_TASK_STATUS_PAUSED, Model: "other"},
		&StatusChanged{Status: TaskStatus_TASK_STATUS_RUNNING},
		&TaskCreated{Owner: "o", Budget: &BudgetAmounts{Tokens: 1}},
	} {
		before := proto.Clone(m)
		FoldMeta(m, NewEvent("T", 99, now, body))
		if !proto.Equal(m, before) {
			t.Fatalf("folding %T changed the metadata folded from:\n%v\nwas\n%v", body, m, before)
		}
	}
}
