package fairschedpg

// What a Store of one process does when the database server restarts
// under it, for maintainers. A cursor (take.go) knows which unseen jobs
// it has handed on by their transactions' ids: those its snapshot known
// shows, and those of the round under way up to where it reached. A crash
// of the server forgets the transactions whose records it had not
// written (aborted ones, and those committed without waiting for the
// disk), and may give their ids again, to transactions known would show
// as done: their jobs would never be read.
//
// A job's ID, though, is never given again once the job was committed:
// the sequence's advance is written before the row, and the row before
// the commit, so the server, replaying what it wrote, resumes its
// sequence past every committed job's ID. So with M the largest ID the
// cursor handed on (maxID), before the restart, of a job committed (the
// exceptions the guide states: a caller's transaction that committed
// without waiting for the disk, and a standby promoted that had not
// received every commit):
//
//   - every job committed after the restart has an ID past M;
//   - every job with an ID up to M was committed before it, by a
//     transaction whose id the server does not give again, so the cursor
//     tells rightly whether it handed it on.
//
// The round after a restart (qTakeAgain) therefore reads every unseen
// unfinished job with an ID past M, or that the cursor as it was had not
// handed on, in ID order, in one snapshot, a window of IDs a page, and
// then goes on as any round's end does, its snapshot known. A restart is
// told by what qServerID reads, which the recovery from any crash
// changes, a backend's included. A page that finds the server
// restarted is dropped before anything in it is handed on, so M and the
// cursor are the restart's. If the server restarts again before that
// round ends, the round begins again from the same cursor, and skips the
// jobs it handed on already (handed). A leader does none of this: its
// term ends, and the next leader reads every job (Recover).

// restarted returns the cursor of the round that reads again, after the
// server restarted (now told by server), the jobs c had not handed on.
func (c takeCursor) restarted(server string) takeCursor {
	again := c.again
	if again == nil {
		was := c
		again = &was
	}
	return takeCursor{server: server, maxID: c.maxID, again: again, handed: c.handed}
}
