package projections

import "fmt"

// feedbackBatch holds the feedback.jsonl lines of the events of one
// Apply (in a home other programs may append to), so that they are
// written with one stat and one write instead of a stat and a write per
// line: the acknowledgement of every append of a commit group waits for
// the group's projection. The bytes are copied (render's buffers are
// reused per event).
type feedbackBatch struct {
	on   bool
	data []byte
	ends []int // end offset in data of each line
}

func (b *feedbackBatch) start(on bool) { b.on = on; b.data, b.ends = b.data[:0], b.ends[:0] }

func (b *feedbackBatch) stop() {
	b.on = false
	if cap(b.data) > 1<<20 { // do not pin a large batch's buffer
		b.data, b.ends = nil, nil
	}
	b.data, b.ends = b.data[:0], b.ends[:0]
}

func (b *feedbackBatch) add(line []byte) {
	b.data = append(b.data, line...)
	b.ends = append(b.ends, len(b.data))
}

// flushFeedbackBatch writes the batched feedback lines. When the file
// ends where the projector's accounting does (nothing foreign or left
// from before a crash after it), the lines go in one write at that end,
// exactly as writeFeedback would place them one after the other;
// otherwise each goes through writeFeedback, which sorts out what is
// there line by line.
func (p *Projector) flushFeedbackBatch() error {
	b := &p.fbBatch
	if len(b.ends) == 0 {
		return nil
	}
	data, ends := b.data, b.ends
	b.data, b.ends = b.data[:0], b.ends[:0]
	if len(ends) > 1 {
		vf, err := p.file(FeedbackView)
		if err != nil {
			return err
		}
		if err := vf.w.Flush(); err != nil {
			return err
		}
		end := p.sizes[FeedbackView]
		fi, err := vf.f.Stat()
		if err != nil {
			return err
		}
		if fi.Size() == end {
			if _, err := vf.f.WriteAt(data, end); err != nil {
				return fmt.Errorf("writing %d feedback lines at %d: %w", len(ends), end, err)
			}
			p.feedbackWritten(end, data)
			return nil
		}
	}
	start := 0
	for _, e := range ends {
		if err := p.writeFeedback(data[start:e], -1); err != nil {
			return err
		}
		start = e
	}
	return nil
}
