package pytorch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
)

// A legacy checkpoint (torch.save before PyTorch 1.6, or later with
// _use_new_zipfile_serialization=False) is five pickles back to back:
//
//  1. the magic number 0x1950a86a20f9469cfc6c,
//  2. the format's protocol version, 1001,
//  3. sys_info, a dict whose little_endian gives the writer's byte order,
//  4. the saved object, whose persistent ids are ('storage', class, key,
//     location, numel, view_metadata),
//  5. the list of storage keys in the order their data follows,
//
// then, for each listed key, the storage's element count as a little-endian
// int64 and its elements. Storages follow each other with no padding, so
// their offsets come from walking these headers.

const (
	legacyMagicHex        = "1950a86a20f9469cfc6c"
	legacyProtocolVersion = 1001
	// legacyFirstRead is how much of the file is read first in search of
	// the pickles' end; it doubles, up to maxPickleBytes, while the pickles
	// run past what has been read.
	legacyFirstRead = 1 << 20
)

// legacyFile is what the pickles of a legacy checkpoint say.
type legacyFile struct {
	table     *storageTable
	object    any      // the saved object
	keys      []string // storage keys in data order
	dataStart int64    // offset of the first storage's header
}

// openLegacy parses a legacy checkpoint of size bytes read through r.
func openLegacy(r io.ReaderAt, size int64) (*File, error) {
	n := min(size, legacyFirstRead)
	for {
		buf := make([]byte, n)
		if m, err := r.ReadAt(buf, 0); m < len(buf) {
			return nil, fmt.Errorf("legacy checkpoint: reading its first %d bytes: %w", n, err)
		}
		lf, err := readLegacyPickles(buf)
		var short *truncatedError
		if errors.As(err, &short) {
			switch {
			case n < size && n < maxPickleBytes:
				n = min(2*n, size, maxPickleBytes)
				continue
			case n == size:
				return nil, fmt.Errorf("%w; the file ends inside this pickle (truncated file?)", err)
			default:
				return nil, fmt.Errorf("%w; the pickles exceed the %d bytes allowed", err, int64(maxPickleBytes))
			}
		}
		if err != nil {
			return nil, err
		}
		if err := lf.locate(r, size); err != nil {
			return nil, fmt.Errorf("legacy checkpoint: %w", err)
		}
		return selectStateDict("legacy checkpoint: saved object", lf.object)
	}
}

// readLegacyPickles runs the five pickles at the start of buf.
func readLegacyPickles(buf []byte) (*legacyFile, error) {
	pos := 0
	next := func(what string, persistentLoad func(any) (any, error)) (any, error) {
		v, n, err := unpickleNext(buf[pos:], persistentLoad)
		if err != nil {
			return nil, fmt.Errorf("legacy checkpoint: %s pickle at byte %d: %w", what, pos, err)
		}
		pos += n
		return v, nil
	}

	v, err := next("magic-number", nil)
	if err != nil {
		return nil, err
	}
	if m, ok := v.(*big.Int); !ok || m.Text(16) != legacyMagicHex {
		return nil, fmt.Errorf("not a zip-format PyTorch checkpoint, nor a legacy one: its first pickle holds %s, want torch's magic number 0x%s",
			describeValue(v), legacyMagicHex)
	}
	if v, err = next("protocol-version", nil); err != nil {
		return nil, err
	}
	if p, ok := v.(int64); !ok || p != legacyProtocolVersion {
		return nil, fmt.Errorf("legacy checkpoint: protocol version is %s, want %d", describeValue(v), legacyProtocolVersion)
	}
	if v, err = next("sys_info", nil); err != nil {
		return nil, err
	}
	info, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("legacy checkpoint: sys_info is %s, want a dict", typeName(v))
	}
	le, _ := info.get("little_endian")
	if b, ok := le.(bool); !ok {
		return nil, fmt.Errorf("legacy checkpoint: sys_info's little_endian is %s, want True", describeValue(le))
	} else if !b {
		return nil, fmt.Errorf("legacy checkpoint: sys_info says little_endian=False (written on a big-endian machine); only little-endian checkpoints are supported")
	}

	lf := &legacyFile{table: &storageTable{refs: map[string]*storageRef{}}}
	if lf.object, err = next("saved-object", lf.table.persistentLoad); err != nil {
		return nil, err
	}
	if v, err = next("storage-key-list", nil); err != nil {
		return nil, err
	}
	list, ok := v.(*pyList)
	if !ok {
		return nil, fmt.Errorf("legacy checkpoint: storage key list is %s, want a list of strings", typeName(v))
	}
	lf.keys = make([]string, len(list.items))
	for i, it := range list.items {
		if lf.keys[i], ok = it.(string); !ok {
			return nil, fmt.Errorf("legacy checkpoint: storage key list entry %d is %s, want a string", i, typeName(it))
		}
	}
	lf.dataStart = int64(pos)
	return lf, nil
}

// view resolves the view_metadata (view_key, offset, numel) of a persistent
// id naming root: the numel elements of root from element offset on, known
// by view_key. Only files from PyTorch before 1.0 have views.
func (st *storageTable) view(root *storageRef, meta any) (*storageRef, error) {
	t, ok := meta.(*pyTuple)
	if !ok || len(t.items) != 3 {
		return nil, fmt.Errorf("storage %q: view metadata is %s, want None or (view_key, offset, numel)", root.key, typeName(meta))
	}
	key, ok := t.items[0].(string)
	if !ok {
		return nil, fmt.Errorf("storage %q: view key is %s, want a string", root.key, typeName(t.items[0]))
	}
	off, ok1 := t.items[1].(int64)
	n, ok2 := t.items[2].(int64)
	if !ok1 || !ok2 || off < 0 || n < 0 || off > root.numel || n > root.numel-off {
		return nil, fmt.Errorf("storage %q: view %q of %s at element offset %s does not fit in its %d elements",
			root.key, key, describeValue(t.items[2]), describeValue(t.items[1]), root.numel)
	}
	if v, ok := st.refs[key]; ok {
		if v.root == nil {
			return nil, fmt.Errorf("storage %q is referenced as a view and as a whole storage", key)
		}
		if v.root != root || v.viewOffset != off || v.numel != n {
			return nil, fmt.Errorf("storage view %q is referenced as %d elements at %d of %q and as %d elements at %d of %q",
				key, v.numel, v.viewOffset, v.root.key, n, off, root.key)
		}
		return v, nil
	}
	v := &storageRef{key: key, class: root.class, location: root.location, dt: root.dt, untyped: root.untyped,
		numel: n, root: root, viewOffset: off}
	st.refs[key] = v
	return v, nil
}

// locate walks the storage headers from lf.dataStart, checking each against
// the saved object's persistent ids and the file's size, and sets the
// record of every storage and view.
func (lf *legacyFile) locate(r io.ReaderAt, size int64) error {
	refs := lf.table.refs
	listed := make(map[string]bool, len(lf.keys))
	off := lf.dataStart
	var head [8]byte
	for i, key := range lf.keys {
		s, ok := refs[key]
		if !ok || s.root != nil {
			return fmt.Errorf("storage key list entry %d, %q, is not a storage the saved object references", i, key)
		}
		if listed[key] {
			return fmt.Errorf("storage key list names %q twice", key)
		}
		listed[key] = true
		if size-off < int64(len(head)) {
			return fmt.Errorf("storage %q: its header at byte %d lies past the end of the file (%d bytes; truncated file?)", key, off, size)
		}
		if _, err := r.ReadAt(head[:], off); err != nil {
			return fmt.Errorf("storage %q: reading its header at byte %d: %w", key, off, err)
		}
		off += int64(len(head))
		if count := binary.LittleEndian.Uint64(head[:]); count != uint64(s.numel) {
			return fmt.Errorf("storage %q: header at byte %d says %d elements, the saved object says %d", key, off-8, count, s.numel)
		}
		nbytes := s.numel * int64(s.dt.Size()) // checked in persistentLoad
		if nbytes > size-off {
			return fmt.Errorf("storage %q: %d bytes (%d elements of %s) at byte %d extend past the end of the file (%d bytes; truncated file?)",
				key, nbytes, s.numel, s.dt, off, size)
		}
		s.record = record{name: key, offset: off, size: nbytes}
		off += nbytes
	}
	keys := make([]string, 0, len(refs))
	for k := range refs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s := refs[k]; s.root == nil && !listed[k] {
			return fmt.Errorf("storage %q has no data: the storage key list (%d entries) does not name it", k, len(lf.keys))
		}
	}
	for _, k := range keys {
		if s := refs[k]; s.root != nil {
			es := int64(s.dt.Size())
			s.record = record{name: k, offset: s.root.record.offset + s.viewOffset*es, size: s.numel * es}
		}
	}
	return nil
}
