package delegate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// What the bridge does with a request of the agent.
type uiAction int

const (
	uiIgnore   uiAction = iota // fire-and-forget (notify, status, widgets, titles, URLs)
	uiApproval                 // a tool-approval dialog: ask a person through Lemo
	uiDecline                  // any other blocking dialog: answered "cancelled"
	uiCancel                   // the agent withdrew an earlier dialog (omp "cancel")
	uiReject                   // a host tool call or host URI request: answered with an error
)

// fireAndForget are extension UI methods that expect no answer.
var fireAndForget = map[string]bool{
	"notify": true, "setStatus": true, "setWidget": true, "setTitle": true, "set_editor_text": true, "open_url": true,
}

// uiRequest is an agent request the bridge answers.
type uiRequest struct {
	id     string
	method string
	// tool and callID name the agent's tool call an approval is for
	// (callID only when the dialog says, as Lemo's pi extension does).
	tool   string
	callID string
	// detail is what the person is shown (cleaned and bounded).
	detail string
	// timeout is the agent's own deadline for the dialog; 0: none.
	timeout time.Duration
	// approve and deny are the select options that mean yes and no; "" for
	// a confirm dialog.
	approve, deny string
	// target is the dialog a "cancel" withdraws.
	target string
	// frameType is the frame's type for host requests.
	frameType string
	// notice is the text of a notify request, for the live view.
	notice, level string
}

// approvalMarker ends the message of Lemo's pi extension's confirm dialog:
// "[lemo-approval tool=<name> call=<toolCallId>]".
var approvalMarker = regexp.MustCompile(`\[lemo-approval tool=([^\s\]]{1,200}) call=([^\s\]]{0,200})\]\s*$`)

// maxDetail bounds what an approval shows of the agent's request.
const maxDetail = 2048

// classifyUI decides what to do with an extension UI request or a host
// request (frame types extension_ui_request, host_tool_call,
// host_uri_request and their cancellations).
func classifyUI(f *Frame) (uiRequest, uiAction) {
	switch f.Type {
	case "host_tool_call", "host_uri_request":
		if f.ID == "" {
			return uiRequest{}, uiIgnore
		}
		return uiRequest{id: f.ID, frameType: f.Type}, uiReject
	case "host_tool_cancel", "host_uri_cancel":
		return uiRequest{}, uiIgnore
	}
	var m struct {
		Title      string   `json:"title"`
		Message    string   `json:"message"`
		Options    []string `json:"options"`
		Timeout    float64  `json:"timeout"`
		TargetID   string   `json:"targetId"`
		NotifyType string   `json:"notifyType"`
	}
	_ = json.Unmarshal(f.Raw, &m) // missing or mistyped fields stay empty
	r := uiRequest{id: f.ID, method: f.Method}
	if m.Timeout > 0 && m.Timeout < float64(365*24*time.Hour/time.Millisecond) {
		r.timeout = time.Duration(m.Timeout) * time.Millisecond
	}
	switch {
	case f.Method == "cancel":
		r.target = m.TargetID
		return r, uiCancel
	case f.Method == "notify":
		r.notice, r.level = m.Message, m.NotifyType
		return r, uiIgnore
	case fireAndForget[f.Method]:
		return r, uiIgnore
	case f.ID == "":
		return r, uiIgnore // nothing to answer
	}
	if f.Method == "confirm" {
		if mm := approvalMarker.FindStringSubmatch(m.Message); mm != nil {
			r.tool, r.callID = mm[1], mm[2]
			r.detail = describe(m.Title, strings.TrimSpace(m.Message[:len(m.Message)-len(mm[0])]))
			return r, uiApproval
		}
	}
	if f.Method == "select" {
		approve, deny := "", ""
		for _, o := range m.Options {
			switch o {
			case "Approve":
				approve = o
			case "Deny":
				deny = o
			}
		}
		if approve != "" && deny != "" {
			r.approve, r.deny = approve, deny
			first, _, _ := strings.Cut(m.Title, "\n")
			if t, ok := strings.CutPrefix(first, "Allow tool: "); ok {
				r.tool = strings.TrimSpace(t)
			}
			r.detail = describe(m.Title, m.Message)
			return r, uiApproval
		}
	}
	return r, uiDecline
}

func describe(title, message string) string {
	s := strings.TrimSpace(title)
	if message = strings.TrimSpace(message); message != "" {
		s += "\n" + message
	}
	out, _ := Bound(s, maxDetail)
	return out
}

// approvalReason is what the person deciding an agent's approval reads.
func approvalReason(kind string, r uiRequest) string {
	tool := r.tool
	if tool == "" {
		tool = "a tool"
	}
	return fmt.Sprintf("The delegate agent (%s) asks to use %s. Its request (untrusted text from the agent):\n%s", kind, Short(tool, 128), r.detail)
}

// answerApproval is the extension_ui_response for a decided approval.
func answerApproval(r uiRequest, approved bool) []byte {
	m := map[string]any{"type": "extension_ui_response", "id": r.id}
	switch {
	case r.approve != "" && approved:
		m["value"] = r.approve
	case r.deny != "" && !approved:
		m["value"] = r.deny
	default:
		m["confirmed"] = approved
	}
	b, _ := json.Marshal(m)
	return b
}

// answerDecline is the extension_ui_response that declines a dialog.
func answerDecline(id string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "extension_ui_response", "id": id, "cancelled": true})
	return b
}

// answerReject refuses a host tool call or host URI request.
func answerReject(r uiRequest) []byte {
	const why = "Lemo offers no host tools or host URI schemes to delegate agents"
	var m map[string]any
	if r.frameType == "host_tool_call" {
		m = map[string]any{"type": "host_tool_result", "id": r.id, "isError": true,
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": why}}}}
	} else {
		m = map[string]any{"type": "host_uri_result", "id": r.id, "isError": true, "error": why}
	}
	b, _ := json.Marshal(m)
	return b
}
