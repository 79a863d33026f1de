package bus

import (
	"container/heap"
	"context"
	"time"
)

// The handlers' timeouts: one heap of the running handlers that have one, earliest deadline
// first, and one timer for the whole worker at (or before) the earliest deadline. A handler
// that returns leaves the heap and the timer stays as it is: when it fires early it finds
// nothing due and is set again for the new earliest deadline, so the timer moves about once
// per timeout, not once per job.

// deadlineParent is the parent of a handler's context when its kind has a timeout: it never
// ends by itself (the heap cancels the handler's context) and reports the deadline, so
// ctx.Deadline() tells the handler, and the calls it makes with ctx, when it will be cut.
type deadlineParent struct{ at time.Time }

func (p *deadlineParent) Deadline() (time.Time, bool) { return p.at, true }
func (p *deadlineParent) Done() <-chan struct{}       { return nil }
func (p *deadlineParent) Err() error                  { return nil }
func (p *deadlineParent) Value(any) any               { return nil }

var _ context.Context = (*deadlineParent)(nil)

// deadlines is the heap and its timer; the executor's lock guards both.
type deadlines struct {
	ex    *executor
	items deadlineHeap
	timer *time.Timer
	at    time.Time // when timer fires; zero when it is stopped
}

func (d *deadlines) init(ex *executor) { d.ex = ex }

// add puts a started handler in the heap, moving the timer earlier when its deadline is.
func (d *deadlines) add(r *inflight) {
	heap.Push(&d.items, r)
	if d.at.IsZero() || r.parent.at.Before(d.at) {
		d.arm(r.parent.at)
	}
}

// remove takes a returned handler out of the heap.
func (d *deadlines) remove(r *inflight) {
	if r.heapSlot >= 0 {
		heap.Remove(&d.items, r.heapSlot)
	}
}

func (d *deadlines) arm(at time.Time) {
	d.at = at
	if d.timer == nil {
		d.timer = time.AfterFunc(time.Until(at), d.fire)
		return
	}
	d.timer.Reset(time.Until(at))
}

// fire cancels every handler past its deadline (cause ErrJobTimeout) and sets the timer for
// the next deadline.
func (d *deadlines) fire() {
	ex := d.ex
	ex.mu.Lock()
	now := time.Now()
	var cut []context.CancelCauseFunc
	for len(d.items) > 0 && !d.items[0].parent.at.After(now) {
		r := heap.Pop(&d.items).(*inflight)
		r.expired = true
		cut = append(cut, r.cancel)
	}
	d.at = time.Time{}
	if len(d.items) > 0 && !ex.closed {
		d.arm(d.items[0].parent.at)
	}
	ex.mu.Unlock()
	for _, cancel := range cut {
		cancel(ErrJobTimeout)
	}
}

// stop stops the timer; the executor is closed and every handler returned.
func (d *deadlines) stop() {
	d.ex.mu.Lock()
	defer d.ex.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.at = time.Time{}
}

// deadlineHeap is a container/heap of inflights by deadline; each knows its slot.
type deadlineHeap []*inflight

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].parent.at.Before(h[j].parent.at) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapSlot, h[j].heapSlot = i, j
}
func (h *deadlineHeap) Push(x any) {
	r := x.(*inflight)
	r.heapSlot = len(*h)
	*h = append(*h, r)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	r.heapSlot = -1
	*h = old[:len(old)-1]
	return r
}
