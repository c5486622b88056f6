package wal

import (
	"reflect"
	"sync"
	"unsafe"

	twal "github.com/tidwall/wal"
)

// tidwall/wal keeps its tail segment in memory: the segment's bytes in a
// slice (ebuf) and each entry's position in another (epos), both grown by
// append from nothing when it opens a segment. Each growth step copies the
// whole slice, and the late ones of a 4 MiB segment copy megabytes inside
// WriteBatch, with tidwall's mutex held: the committer stalls for 1–40 ms
// (the stall probe of `cmlab bench wal`), and every append queued behind
// it waits that long for its acknowledgement.
//
// tidwall has no option to size these buffers, so tailBuf does it from
// outside: right after tidwall opened a segment (Open, and every
// WriteBatch that cycled) it replaces the tail segment's two slices, still
// nearly empty, by copies with room for a whole segment, allocated and
// touched page by page ahead of time by a background goroutine. Appends
// then never reallocate (unless one segment outgrows its estimate; then
// tidwall's append grows it as before). It reaches tidwall's unexported
// fields by reflection, for the version go.mod pins; if their names or
// types ever differ it does nothing (TestTailBufPresizes fails then), and
// the log works as before.
type tailBuf struct {
	tw    *twal.Log
	mu    *sync.RWMutex // tidwall's own lock: Read runs under it concurrently
	segs  reflect.Value // tidwall's segments []*segment
	posT  reflect.Type  // []bpos
	ebCap int           // capacity of a fresh ebuf
	epCap int           // capacity of a fresh epos (entries per segment, estimated)

	spare  chan tailSpare // (cap 1) the next segment's buffers, made in the background
	making bool           // a spare is being made or waits in spare; committer only
	wg     sync.WaitGroup // the goroutine making it
}

// tailSpare is a pair of fresh buffers for the next tail segment.
type tailSpare struct {
	ebuf []byte
	epos reflect.Value // an empty []bpos with capacity
}

// tailSlack is room beyond the segment size: tidwall cycles after the
// entry that reaches it, so the last entry may overhang.
const tailSlack = 64 << 10

// newTailBuf returns nil when tidwall's layout is not the expected one.
func newTailBuf(tw *twal.Log, segSize int) *tailBuf {
	v := reflect.ValueOf(tw).Elem()
	mu, segs := v.FieldByName("mu"), v.FieldByName("segments")
	if !mu.IsValid() || mu.Type() != reflect.TypeOf(sync.RWMutex{}) || !segs.IsValid() ||
		segs.Kind() != reflect.Slice || segs.Type().Elem().Kind() != reflect.Pointer {
		return nil
	}
	st := segs.Type().Elem().Elem()
	eb, ok1 := st.FieldByName("ebuf")
	ep, ok2 := st.FieldByName("epos")
	if !ok1 || !ok2 || eb.Type != reflect.TypeOf([]byte(nil)) || ep.Type.Kind() != reflect.Slice {
		return nil
	}
	bp := ep.Type.Elem()
	if bp.Kind() != reflect.Struct || bp.NumField() != 2 || bp.Field(0).Type.Kind() != reflect.Int || bp.Field(1).Type.Kind() != reflect.Int {
		return nil
	}
	t := &tailBuf{tw: tw, mu: (*sync.RWMutex)(unsafe.Pointer(mu.UnsafeAddr())),
		segs: reflect.NewAt(segs.Type(), unsafe.Pointer(segs.UnsafeAddr())).Elem(),
		posT: ep.Type, ebCap: segSize + tailSlack, epCap: max(1024, segSize/128),
		spare: make(chan tailSpare, 1)}
	return t
}

// fields returns tidwall's tail segment's ebuf and epos, settable.
func (t *tailBuf) fields() (ebuf, epos reflect.Value) {
	s := t.segs.Index(t.segs.Len() - 1).Elem()
	ebuf, epos = s.FieldByName("ebuf"), s.FieldByName("epos")
	return reflect.NewAt(ebuf.Type(), unsafe.Pointer(ebuf.UnsafeAddr())).Elem(),
		reflect.NewAt(epos.Type(), unsafe.Pointer(epos.UnsafeAddr())).Elem()
}

// presize gives tidwall's tail segment room for a whole segment, from the
// spare if one is ready (else allocated now). The committer calls it right
// after tidwall opened a segment, between WriteBatches: nothing writes the
// slices meanwhile, and tidwall's lock keeps its readers out. prevEntries
// is how many entries the segment before held (0: unknown).
func (t *tailBuf) presize(prevEntries int) {
	t.epCap = max(t.epCap, prevEntries+prevEntries/4)
	var sp tailSpare
	select {
	case sp = <-t.spare:
		t.making = false
	default:
		sp = makeSpare(t.posT, t.ebCap, t.epCap)
	}
	t.mu.Lock()
	ebuf, epos := t.fields()
	if ebuf.Len() <= cap(sp.ebuf) && epos.Len() <= sp.epos.Cap() {
		ebuf.SetBytes(append(sp.ebuf, ebuf.Bytes()...))
		epos.Set(reflect.AppendSlice(sp.epos, epos))
	}
	t.mu.Unlock()
}

// prepare starts allocating the next segment's buffers in the background
// unless that is under way or done; the committer calls it once the tail
// segment is half full, so that a log that never fills a segment never
// holds a spare.
func (t *tailBuf) prepare() {
	if t.making {
		return
	}
	t.making = true
	t.wg.Add(1)
	go func(eb, ep int) {
		defer t.wg.Done()
		t.spare <- makeSpare(t.posT, eb, ep)
	}(t.ebCap, t.epCap)
}

// makeSpare allocates a pair of empty buffers with room for a segment.
// The allocation of a span Go reuses includes zeroing it: megabytes, which
// is why the spare is made in the background.
func makeSpare(posT reflect.Type, ebCap, epCap int) tailSpare {
	return tailSpare{ebuf: make([]byte, 0, ebCap), epos: reflect.MakeSlice(posT, 0, epCap)}
}

// close waits for the goroutine making a spare.
func (t *tailBuf) close() { t.wg.Wait() }
