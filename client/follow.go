package client

import (
	"context"
	"errors"
	"time"

	"lemo/api"
)

// ErrStopFollowing, returned by a Follow callback, ends Follow without an
// error.
var ErrStopFollowing = errors.New("client: stop following")

// FollowOptions select what Follow delivers.
type FollowOptions struct {
	// TaskID follows one Task; "" every Task the token may see.
	TaskID string
	// FromSeq, for one Task, is the first seq to deliver (0: live only).
	FromSeq uint64
	// Resume, for every Task, is the last seq already held per Task.
	Resume map[string]uint64
	// NoDeltas leaves out live deltas.
	NoDeltas bool
	// Notice, when set, is told when the stream broke (the daemon went
	// away, the reader fell behind) and Follow resumes.
	Notice func(why string)
	// MaxRetry caps the wait between attempts to resubscribe (default 5s).
	MaxRetry time.Duration
}

// Follow subscribes and delivers updates to fn, in order: each committed
// event exactly once (per Task, seqs contiguous from where it started),
// live deltas, CaughtUp after each (re)subscription's replay. When the
// subscription ends (the reader fell behind, the daemon restarted) Follow
// subscribes again from the last seq it delivered, reconnecting as needed,
// and fills any gap from history. It returns nil when ctx ends or fn
// returns ErrStopFollowing, fn's other errors, and errors that retrying
// cannot fix (unknown Task, refused token).
func (c *Conn) Follow(ctx context.Context, o FollowOptions, fn func(*api.Update) error) error {
	last := make(map[string]uint64, len(o.Resume))
	for t, s := range o.Resume {
		last[t] = s
	}
	if o.TaskID != "" && o.FromSeq > 0 {
		last[o.TaskID] = o.FromSeq - 1
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 5 * time.Second
	}
	wait := 100 * time.Millisecond
	notice := func(why string) {
		if o.Notice != nil {
			o.Notice(why)
		}
	}
	deliver := func(u *api.Update) error {
		if err := fn(u); err != nil {
			return err
		}
		return nil
	}
	for {
		so := SubscribeOptions{TaskID: o.TaskID, NoDeltas: o.NoDeltas}
		if o.TaskID != "" {
			if l, ok := last[o.TaskID]; ok {
				so.FromSeq = l + 1
			}
		} else if len(last) > 0 {
			so.Resume = last
		}
		sub, err := c.Subscribe(ctx, so)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid), errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrClosed):
				return err
			}
			notice("subscribe: " + err.Error())
			if !sleep(ctx, wait) {
				return nil
			}
			wait = min(wait*2, o.MaxRetry)
			continue
		}
		wait = 100 * time.Millisecond
		if _, ok := last[o.TaskID]; o.TaskID != "" && !ok && sub.Task != nil {
			// Live only: everything after the Task's state at subscription
			// time is contiguous, so a resume can start there.
			last[o.TaskID] = sub.Task.GetLastSeq()
		}
		why, err := c.drain(ctx, sub, last, deliver)
		sub.Close()
		switch {
		case errors.Is(err, ErrStopFollowing):
			return nil
		case err != nil:
			return err
		case ctx.Err() != nil:
			return nil
		}
		notice(why)
		if why != "fell behind" && !sleep(ctx, wait) {
			return nil
		}
	}
}

// drain delivers one subscription's updates; it returns why it ended.
func (c *Conn) drain(ctx context.Context, sub *Subscription, last map[string]uint64, deliver func(*api.Update) error) (string, error) {
	for {
		var u *api.Update
		var ok bool
		select {
		case u, ok = <-sub.C:
		case <-ctx.Done():
			return "", nil
		}
		if !ok {
			return "the subscription ended", nil
		}
		switch b := u.GetBody().(type) {
		case *api.Update_Event:
			ev := b.Event
			t, seq := ev.GetTaskId(), ev.GetSeq()
			l, known := last[t]
			if known && seq <= l {
				continue // already delivered
			}
			if known && seq > l+1 {
				// A gap (cannot happen on one subscription; defensive
				// after a resume): fill it from history.
				evs, err := c.ReadHistory(ctx, t, l+1)
				if err != nil {
					return "read history: " + err.Error(), nil
				}
				for _, h := range evs {
					if h.GetSeq() >= seq {
						break
					}
					if err := deliver(&api.Update{Body: &api.Update_Event{Event: h}}); err != nil {
						return "", err
					}
					last[t] = h.GetSeq()
				}
			}
			if err := deliver(u); err != nil {
				return "", err
			}
			last[t] = seq
		case *api.Update_FellBehind:
			return "fell behind", nil
		case *api.Update_Ended:
			return b.Ended.GetReason(), nil
		default:
			if err := deliver(u); err != nil {
				return "", err
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
