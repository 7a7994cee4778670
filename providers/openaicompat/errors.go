package openaicompat

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"lemo/providers"
	"lemo/providers/retry"
)

// typeClasses maps typed error names (OpenRouter error_type and
// availability codes, Zen error types, OpenAI codes) to classes. Source:
// notes/providers.md §2.4 and §4.4.
var typeClasses = map[string]providers.Class{
	"context_length_exceeded":  providers.ClassContextOverflow,
	"max_tokens_exceeded":      providers.ClassContextOverflow,
	"rate_limit_exceeded":      providers.ClassRateLimit,
	"ratelimiterror":           providers.ClassRateLimit,
	"capacity_exhausted":       providers.ClassRateLimit,
	"freeusagelimiterror":      providers.ClassQuota,
	"creditserror":             providers.ClassQuota,
	"monthlylimiterror":        providers.ClassQuota,
	"userlimiterror":           providers.ClassQuota,
	"payment_required":         providers.ClassQuota,
	"insufficient_quota":       providers.ClassQuota,
	"autherror":                providers.ClassAuth,
	"authentication":           providers.ClassAuth,
	"invalid_api_key":          providers.ClassAuth,
	"permission_denied":        providers.ClassAuth,
	"regionerror":              providers.ClassAuth,
	"modelerror":               providers.ClassModelNotFound,
	"model_not_found":          providers.ClassModelNotFound,
	"no_endpoints":             providers.ClassModelNotFound,
	"free_variant_ended":       providers.ClassModelNotFound,
	"content_policy_violation": providers.ClassBadRequest,
	"invalid_prompt":           providers.ClassBadRequest,
	"refusal":                  providers.ClassBadRequest,
	"provider_overloaded":      providers.ClassTransient,
	"provider_unavailable":     providers.ClassTransient,
	"temporarily_unavailable":  providers.ClassTransient,
	"server":                   providers.ClassTransient,
	"server_error":             providers.ClassTransient,
	"timeout":                  providers.ClassTransient,
}

// classify turns an error status and body into a class: typed names win,
// then the status refined by the message.
func classify(status int, info ErrorInfo) providers.Class {
	for _, t := range info.Types {
		if c, ok := typeClasses[strings.ToLower(t)]; ok {
			// A context overflow reported as a generic 400 type stays an
			// overflow; typed names are more precise than statuses.
			return c
		}
	}
	if c, ok := typeClasses[strings.ToLower(info.Code)]; ok {
		return c
	}
	if status == http.StatusForbidden && info.Reasons {
		return providers.ClassBadRequest // OpenRouter moderation, not credentials
	}
	c := retry.ClassForStatus(status, info.Message)
	if c == providers.ClassBadRequest && upstreamOverflow(info.Message) {
		return providers.ClassContextOverflow
	}
	return c
}

// upstreamOverflowPhrases are context-overflow texts of upstream vendors
// that gateways pass on verbatim (Zen: "Error from provider (Moonshot AI):
// Invalid request: Your request exceeded model token limit: 262144";
// Anthropic through OpenRouter: "Input is too long for requested model").
var upstreamOverflowPhrases = []string{"exceeded model token limit", "input is too long"}

func upstreamOverflow(msg string) bool {
	m := strings.ToLower(msg)
	for _, p := range upstreamOverflowPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// httpError builds the *providers.Error for a response with status >= 400.
func (p *Provider) httpError(resp *http.Response, body []byte) *providers.Error {
	info := ParseErrorBody(body)
	class := classify(resp.StatusCode, info)
	if p.opts.Hooks.Classify != nil {
		class = p.opts.Hooks.Classify(resp.StatusCode, info, class)
	}
	msg := retry.CleanMessage(info.Message, p.opts.APIKey)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e := &providers.Error{
		Provider: p.opts.Name,
		Class:    class,
		Status:   resp.StatusCode,
		Message:  msg,
	}
	if class == providers.ClassRateLimit || class == providers.ClassTransient || class == providers.ClassQuota {
		e.RetryAfter = retry.ParseRetryAfter(resp.Header, time.Now())
	}
	return e
}

// streamError builds the error for an error object that arrived inside
// a 200 stream. It wraps providers.ErrTruncated: the answer is incomplete.
func (p *Provider) streamError(info ErrorInfo, output bool) *providers.Error {
	status, _ := strconv.Atoi(info.Code)
	class := providers.ClassTransient
	if c, ok := typeClasses[strings.ToLower(firstNonEmpty(info.Types...))]; ok {
		class = c
	} else if status >= 400 {
		class = retry.ClassForStatus(status, info.Message)
	}
	if p.opts.Hooks.Classify != nil {
		class = p.opts.Hooks.Classify(status, info, class)
	}
	msg := info.Message
	if msg == "" {
		msg = "error in stream"
	}
	return &providers.Error{
		Provider:      p.opts.Name,
		Class:         class,
		Message:       retry.CleanMessage("mid-stream: "+msg, p.opts.APIKey),
		OutputStarted: output,
		Err:           fmt.Errorf("%w: the provider reported an error mid-stream", providers.ErrTruncated),
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// cause is the text of a transport error without the method and URL that
// *url.Error adds ("dial tcp 127.0.0.1:9: connect: connection refused").
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
