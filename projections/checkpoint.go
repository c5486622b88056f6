package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/cmlab/cmlab/home"
)

// checkpointVersion is the format version of state/checkpoint.json that
// this projector writes when it has sealed views (sealed.go), else
// version 2, which older builds read too (a build that knows no sealed
// views refuses version 3, and so rebuilds the views, rather than trust
// views it cannot check). Version 1 (no tails, no sum) is still read.
const (
	checkpointVersion   = 3
	checkpointVersionV2 = 2
	checkpointVersionV1 = 1
)

// TailBytes is how many bytes before a view's checkpointed size its tail
// checksum covers (fewer when the view is shorter).
const TailBytes = 1024

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint is the content of state/checkpoint.json:
//
//	{"version":3,"seq":1234,"views":{"feedback/feedback.jsonl":5678,...},
//	 "tails":{"feedback/feedback.jsonl":3735928559,...},
//	 "crcs":{"feedback/feedback.jsonl":2882400001,...},
//	 "sealed":{"count":12,"size":1100,"tail":1234,"crc":5678},"sum":123456789}
//
// seq is the last event whose projection every listed view holds, and views
// maps each view file (home-relative, forward slashes) to its byte size at
// that point. tails holds, per non-empty view, the CRC-32C of its last
// min(size, TailBytes) bytes before that size: Open rebuilds a view whose
// bytes there differ (disk damage, a tampered size). crcs holds, per
// non-empty view, the CRC-32C of all its bytes before size: Open reads every
// view whole and rebuilds one whose bytes differ anywhere, not only in its
// tail. Checkpoints written before crcs existed (no crcs key) get the tail
// check only; their sum, computed without the key, still matches. sum is the CRC-32C of
// the checkpoint's JSON encoding with sum 0, so a damaged seq or size is
// caught before any view is trusted. Keys are written sorted, so equal
// checkpoints are equal bytes. Version 1 files carry neither tails nor sum.
type Checkpoint struct {
	Version int               `json:"version"`
	Seq     uint64            `json:"seq"`
	Views   map[string]int64  `json:"views"`
	Tails   map[string]uint32 `json:"tails,omitempty"`
	CRCs    map[string]uint32 `json:"crcs,omitempty"`
	Sealed  *SealedViews      `json:"sealed,omitempty"`
	Sum     uint32            `json:"sum,omitempty"` // the last member: sealCheckpoint appends it
}

// ReadCheckpoint loads h's checkpoint. A missing file is (nil, nil); an
// unreadable or malformed one, or a version 2 one whose sum does not match
// its content, is an error wrapping ErrCheckpoint.
func ReadCheckpoint(h home.Home) (*Checkpoint, error) {
	b, err := os.ReadFile(h.CheckpointFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	return decodeCheckpoint(b)
}

// decodeCheckpoint is ReadCheckpoint of the file's bytes b.
func decodeCheckpoint(b []byte) (*Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("%w: state/checkpoint.json: %v", ErrCheckpoint, err)
	}
	switch cp.Version {
	case checkpointVersionV1:
		cp.Tails, cp.CRCs, cp.Sealed = nil, nil, nil // not trusted: version 1 has no sum over them
	case checkpointVersionV2, checkpointVersion:
		if sum, ok := rawSum(b); ok && sum == cp.Sum {
			break
		}
		want, err := cp.sum()
		if err != nil {
			return nil, fmt.Errorf("%w: state/checkpoint.json: %v", ErrCheckpoint, err)
		}
		if cp.Sum != want {
			return nil, fmt.Errorf("%w: state/checkpoint.json: sum %d does not match its content (%d)", ErrCheckpoint, cp.Sum, want)
		}
		if cp.Version == checkpointVersionV2 {
			cp.Sealed = nil // version 2 sealed nothing
		}
	default:
		return nil, fmt.Errorf("%w: state/checkpoint.json has version %d, want %d to %d", ErrCheckpoint, cp.Version, checkpointVersionV1, checkpointVersion)
	}
	if cp.Views == nil {
		cp.Views = map[string]int64{}
	}
	return &cp, nil
}

// ReadCheckpointSeq returns the seq h's checkpoint covers, present false
// when there is none; it trusts the checkpoint exactly when ReadCheckpoint
// does. A file as writeCheckpoint writes it is checked on its own bytes
// (rawSum) and only its head is decoded: a terminal home's checkpoint
// lists a view per block, 0.7 MB at 1M events, which `cmlab status`
// decoded whole for the seq alone. Any other file is decoded whole.
func ReadCheckpointSeq(h home.Home) (seq uint64, present bool, err error) {
	// A large checkpoint is read mapped (mapCheckpointOver): the file is
	// replaced by rename, never in place, so a mapping keeps the file it
	// mapped whole; a fault all the same is an untrusted checkpoint.
	rerr := home.ReadMapped(h.CheckpointFile(), mapCheckpointOver, func(b []byte) {
		seq, present, err = checkpointSeqOf(b)
	})
	switch {
	case errors.Is(rerr, fs.ErrNotExist):
		return 0, false, nil
	case rerr != nil:
		return 0, false, fmt.Errorf("%w: %v", ErrCheckpoint, rerr)
	}
	return seq, present, err
}

// checkpointSeqOf is ReadCheckpointSeq of the checkpoint bytes b.
func checkpointSeqOf(b []byte) (seq uint64, present bool, err error) {
	if _, ok := rawSum(b); ok {
		if v, seq, ok := checkpointHead(b); ok && (v == checkpointVersion || v == checkpointVersionV2) {
			return seq, true, nil
		}
	}
	cp, err := decodeCheckpoint(b)
	if err != nil {
		return 0, false, err
	}
	return cp.Seq, true, nil
}

// mapCheckpointOver is the size from which ReadCheckpointSeq maps the
// checkpoint instead of reading it: a terminal home's checkpoint of
// 7.6 MB read into a fresh buffer was a third of a cmlab status there.
const mapCheckpointOver = 256 << 10

// checkpointHead decodes the first two members of checkpoint bytes b,
// version and seq, as writeCheckpoint writes them first; ok false if b
// does not start so.
func checkpointHead(b []byte) (version int, seq uint64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var toks [5]json.Token
	for i := range toks {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		toks[i] = t
	}
	v, vok := toks[2].(json.Number)
	n, nok := toks[4].(json.Number)
	if toks[0] != json.Delim('{') || toks[1] != "version" || toks[3] != "seq" || !vok || !nok {
		return 0, 0, false
	}
	vi, err1 := strconv.Atoi(string(v))
	si, err2 := strconv.ParseUint(string(n), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return vi, si, true
}

// sumMember starts the last member of a sealed checkpoint's encoding.
const sumMember = `,"sum":`

// rawSum returns the sum of checkpoint bytes b, ok when they are as
// writeCheckpoint writes them — the JSON encoding ending in `,"sum":N}`
// and a newline — and N is the CRC-32C of the same bytes without the sum
// member: the encoding with Sum zero, which is what cp.sum() re-encodes a
// decoded checkpoint to. Such a file passes the sum check without that
// re-encoding; ok false says only that this shortcut does not apply.
func rawSum(b []byte) (uint32, bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	i := bytes.LastIndex(b, []byte(sumMember))
	if i < 0 || !bytes.HasSuffix(b, []byte("}")) {
		return 0, false
	}
	digits := b[i+len(sumMember) : len(b)-1]
	n, err := strconv.ParseUint(string(digits), 10, 32)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != string(digits) {
		return 0, false
	}
	crc := crc32.Update(0, castagnoli, b[:i])
	if crc32.Update(crc, castagnoli, []byte("}")) != uint32(n) {
		return 0, false
	}
	return uint32(n), true
}

// unsealed is cp's JSON encoding with Sum zero (which omits it): what
// its sum covers.
func (cp *Checkpoint) unsealed() ([]byte, error) {
	c := *cp
	c.Sum = 0
	return json.Marshal(&c)
}

// sum is the CRC-32C of cp's JSON encoding with Sum zero.
func (cp *Checkpoint) sum() (uint32, error) {
	b, err := cp.unsealed()
	if err != nil {
		return 0, err
	}
	return crc32.Checksum(b, castagnoli), nil
}

// writeCheckpoint seals cp with its sum and replaces state/checkpoint.json
// atomically (durably unless noSync: a projector whose views are not
// fsynced either).
func writeCheckpoint(h home.Home, cp *Checkpoint, noSync bool) error {
	b, err := sealCheckpoint(cp)
	if err != nil {
		return err
	}
	return writeFile(h.CheckpointFile(), b, noSync)
}

// sealCheckpoint sets cp.Sum and returns the file's bytes: the JSON
// encoding of cp with Sum zero (which omits it), then `,"sum":N` spliced
// before its closing brace — what encoding cp with its sum gives, Sum
// being the last field, from one encoding instead of two (a terminal
// home's checkpoint lists a view per block).
func sealCheckpoint(cp *Checkpoint) ([]byte, error) {
	b, err := cp.unsealed()
	if err != nil {
		return nil, err
	}
	cp.Sum = crc32.Checksum(b, castagnoli)
	if cp.Sum == 0 {
		// omitempty: the sealed encoding is the one already made.
		return append(b, '\n'), nil
	}
	b = append(b[:len(b)-1], sumMember...)
	b = strconv.AppendUint(b, uint64(cp.Sum), 10)
	return append(b, '}', '\n'), nil
}

// viewTail is the tail checksum of a view at a size.
type viewTail struct {
	size int64
	crc  uint32
}

// readTail returns the CRC-32C of the min(size, TailBytes) bytes of r
// before size. A file shorter than size is an error.
func readTail(r io.ReaderAt, size int64) (uint32, error) {
	n := min(size, TailBytes)
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-n); err != nil {
		return 0, err
	}
	return crc32.Checksum(buf, castagnoli), nil
}

// tailMatches reports whether the file at path, of at least size bytes,
// still holds at size what the checkpoint recorded there: for a version 2
// checkpoint the tail checksum of every non-empty view; for every version,
// a JSONL view's size must fall on a line boundary.
func tailMatches(path, view string, size int64, cp *Checkpoint) (bool, error) {
	if size == 0 {
		return true, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return tailMatchesAt(f, view, size, cp)
}

// tailMatchesAt is tailMatches of the view's bytes r.
func tailMatchesAt(r io.ReaderAt, view string, size int64, cp *Checkpoint) (bool, error) {
	if size == 0 {
		return true, nil
	}
	crc, haveCRC := cp.Tails[view]
	if cp.Version >= checkpointVersionV2 && !haveCRC {
		return false, nil
	}
	if strings.HasSuffix(view, ".jsonl") {
		var last [1]byte
		if _, err := r.ReadAt(last[:], size-1); err != nil {
			return false, err
		}
		if !bytes.Equal(last[:], []byte("\n")) {
			return false, nil
		}
	}
	if !haveCRC {
		return true, nil
	}
	got, err := readTail(r, size)
	if err != nil {
		return false, err
	}
	return got == crc, nil
}

// readCRC returns the CRC-32C of the first size bytes of r. A file shorter
// than size is an error.
func readCRC(r io.ReaderAt, size int64) (uint32, error) {
	var crc uint32
	buf := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := r.ReadAt(buf[:n], off); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += n
	}
	return crc, nil
}

// wholeMatches reports whether the first size bytes of the file at path
// have the CRC the checkpoint recorded for view, and returns that CRC. A
// checkpoint without crcs (written before they existed) matches
// vacuously; one with crcs but none for a non-empty view does not.
func wholeMatches(path, view string, size int64, cp *Checkpoint) (uint32, bool, error) {
	if size == 0 {
		return 0, true, nil
	}
	want, ok := cp.CRCs[view]
	if cp.CRCs == nil {
		return 0, true, nil
	}
	if !ok {
		return 0, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	got, err := readCRC(f, size)
	if err != nil {
		return 0, false, err
	}
	return got, got == want, nil
}

// Vouches reports whether data, the bytes of view's file, holds before
// the size cp records for view (0 when cp does not list it) what cp
// recorded there: the checks Open makes before it trusts that size (a
// JSONL view's size ends a line, the tail checksum, the whole-view CRC
// when cp has crcs). Open rebuilds a view that fails them from the log,
// so its bytes past that size tell nothing about another program's lines.
func (cp *Checkpoint) Vouches(view string, data []byte) bool {
	size := cp.Views[view]
	if size > int64(len(data)) {
		return false
	}
	if ok, err := tailMatchesAt(bytes.NewReader(data), view, size, cp); err != nil || !ok {
		return false
	}
	if size == 0 || cp.CRCs == nil {
		return true
	}
	want, ok := cp.CRCs[view]
	return ok && crc32.Checksum(data[:size], castagnoli) == want
}
