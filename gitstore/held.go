package gitstore

import "maps"

// Hold serves reads (Read, Cursor.Read and ReadWhere) of the objects objs
// from memory, a copy each time, until release is called: a caller that
// has just stored objects it holds decoded, and reads them back at once (a
// received range written as a pack and then verified, ledger.takeSent),
// does not inflate what it has just compressed. Every object in objs must
// be named by the hash of its content (NewObject, DecodeEntry,
// DeltaObject), or as this database names it (ReadEntry), and already be
// stored in this database (its pack added, AddPack): Hold changes how
// an object is read, never whether it is there. Holds may overlap; a
// release drops its objects' ids, and a read of a dropped id goes to the
// store as without a hold.
func (db *ObjectDB) Hold(objs map[ObjectID]*Object) (release func()) {
	db.mu.Lock()
	defer db.mu.Unlock()
	next := map[ObjectID]*Object{}
	if cur := db.held.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	maps.Copy(next, objs)
	db.held.Store(&next)
	return func() {
		db.mu.Lock()
		defer db.mu.Unlock()
		cur := db.held.Load()
		if cur == nil {
			return
		}
		rest := maps.Clone(*cur)
		for id := range objs {
			delete(rest, id)
		}
		if len(rest) == 0 {
			db.held.Store(nil)
			return
		}
		db.held.Store(&rest)
	}
}

// heldObject is the held object id, nil if none.
func (db *ObjectDB) heldObject(id ObjectID) *Object {
	if h := db.held.Load(); h != nil {
		return (*h)[id]
	}
	return nil
}
