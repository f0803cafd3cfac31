package gitstore

import (
	"bytes"
	"fmt"
	"hash/crc32"
)

// Object is an object with its id and, once known, its pack entry. The id
// is never the caller's word: NewObject and DecodeEntry compute it from the
// content, ObjectDB.ReadEntry takes it from the store it reads (as Read
// does). So a PackWriter given an Object (AddObject) indexes it under that
// id without hashing it again.
type Object struct {
	id    ObjectID
	typ   ObjectType
	data  []byte
	entry []byte // its pack entry (type and size header, zlib stream); nil until known
}

// NewObject is the object of type t with content data.
func NewObject(t ObjectType, data []byte) *Object {
	return &Object{id: HashObject(t, data), typ: t, data: data}
}

// ID is the object's id.
func (o *Object) ID() ObjectID { return o.id }

// Type is the object's type.
func (o *Object) Type() ObjectType { return o.typ }

// Data is the object's content. The caller must not modify it.
func (o *Object) Data() []byte { return o.data }

// Entry is the object's pack entry: the one it arrived as or was stored
// as, else its content compressed into a new one. The caller must not
// modify it.
func (o *Object) Entry() []byte {
	if o.entry == nil {
		o.entry = encodeEntry(o.typ, o.data)
	}
	return o.entry
}

// DecodeEntry reads entry, the pack entry of an object stored whole (a
// commit, tree, blob or tag; not a delta), whose content is at most max
// bytes: its header must decode, and its zlib stream must inflate to the
// size the header gives, with a valid checksum, and end exactly where the
// entry does (nothing a pack copying the entry would carry unread). The id
// is the SHA-1 of what it inflates to. The Object keeps entry (the caller
// must not modify it afterwards).
func DecodeEntry(entry []byte, max uint64) (*Object, error) {
	kind, size, n, err := packEntryHeader(entry)
	if err != nil {
		return nil, err
	}
	if kind < int8(CommitObject) || kind > int8(TagObject) {
		return nil, fmt.Errorf("gitstore: pack entry of type %d is not a whole object", kind)
	}
	if size > max {
		return nil, fmt.Errorf("gitstore: pack entry of %d bytes, more than %d", size, max)
	}
	data, end, err := packInflate(entry[n:], size)
	if err != nil {
		return nil, fmt.Errorf("gitstore: pack entry: %w", err)
	}
	if rest := len(entry) - n - end; rest != 0 {
		return nil, fmt.Errorf("gitstore: pack entry: %d bytes after its zlib stream", rest)
	}
	t := ObjectType(kind)
	return &Object{id: HashObject(t, data), typ: t, data: data, entry: entry}, nil
}

// ReadEntry reads object id with its pack entry as stored, when it is
// stored whole in a pack and the entry matches the CRC32 the pack's index
// records for it (checkedEntry); its extent is where its zlib stream ends,
// which reading the content finds. Otherwise (loose, a delta, an entry
// that does not check) the Object has no entry until Entry makes one.
func (db *ObjectDB) ReadEntry(id ObjectID) (*Object, error) {
	db.readers.RLock()
	defer db.endRead()
	loc, err := db.locate(id, nil, true)
	if err != nil {
		return nil, err
	}
	if loc.loose == nil {
		if o := loc.m.storedObject(id, loc.off); o != nil {
			return o, nil
		}
		t, data, err := db.packRead(loc, 0, nil)
		if err != nil {
			return nil, err
		}
		return &Object{id: id, typ: t, data: data}, nil
	}
	t, data, err := looseRead(loc.loose, id)
	if err != nil {
		return nil, err
	}
	return &Object{id: id, typ: t, data: data}, nil
}

// storedObject is the object id stored whole at off, with a copy of its
// entry; nil for a delta or an entry that does not inflate or check.
func (m *packMaps) storedObject(id ObjectID, off uint64) *Object {
	pos, ok := m.idx.position(id)
	e, err := m.entry(off)
	if !ok || err != nil || e.kind < int8(CommitObject) || e.kind > int8(TagObject) {
		return nil
	}
	data, end, err := packInflate(m.data[e.start:len(m.data)-20], e.size)
	if err != nil {
		return nil
	}
	entry, err := checkedEntry(m.data, off, uint64(e.start+end), m.idx.crc(pos))
	if err != nil {
		return nil
	}
	return &Object{id: id, typ: ObjectType(e.kind), data: data, entry: bytes.Clone(entry)}
}

// checkedEntry is the pack entry data[off:end] if it has the CRC32 crc (the
// one its index records), as git checks an entry it reuses: an entry
// copied into another pack keeps its bytes, so a damaged one must not be
// copied, where inflating and compressing it again would give a new entry
// whose CRC32 hides the damage from CheckStored.
func checkedEntry(data []byte, off, end uint64, crc uint32) ([]byte, error) {
	if end <= off || end > uint64(len(data)) || crc32.ChecksumIEEE(data[off:end]) != crc {
		return nil, fmt.Errorf("pack at %d: the entry does not match the CRC32 its index records", off)
	}
	return data[off:end], nil
}
