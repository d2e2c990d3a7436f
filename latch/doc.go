// Package latch provides a leader latch on ZooKeeper: Apache Curator's
// LeaderLatch semantics, with fencing tokens.
//
// A participant (a Latch, with an id of the caller's choice) joins an
// election under a directory and stays in it until Close: it is the leader
// while its znode is the first of the directory (the "Leader Election"
// recipe of the ZooKeeper recipes page, as Curator's LeaderLatch implements
// it). Start joins; Await blocks until this participant leads; IsLeader
// tells at once; Listen delivers every change of leadership in order without
// ever blocking the client; Participants and Leader show the election; Close
// leaves it for good.
//
// # What happens when
//
//   - Joining creates one ephemeral sequential znode (protected name, data:
//     the id) under the directory, creating the directory and its missing
//     parents as container znodes. Each participant watches only its
//     immediate predecessor (no herd effect); the lowest node leads.
//   - A vanished predecessor makes the participant list the directory again
//     and re-decide; it never deletes and re-creates its own node (no
//     leapfrog livelock, case C11). Only Close deletes the node.
//   - SUSPENDED (the connection dropped, or no server replied for 2/3 of the
//     session timeout; see zookeeper.RevokeOnSuspend) ends leadership at once
//     by default: the grant's context ends with recipe.ErrSuspended and
//     listeners are told "not leader". The znode is kept: when the
//     connection comes back within the same ZooKeeper session
//     (RECONNECTED), the participant is still in its place and, if it is
//     still first, leads again with the same node and the same token.
//     Session options such as zookeeper.TolerateSuspension change when
//     SUSPENDED ends ownership, exactly as for every other recipe.
//   - When the session is lost (expired, or presumed expired), the node went
//     with it: the participant joins again with a new node under the new
//     session, behind everyone already there, as Curator does. The same
//     happens when its node is deleted by someone else, and when the whole
//     directory is deleted under live participants (an operator's
//     deleteall, a restore from an old snapshot: case C17): participants
//     re-create it and elect a leader. Re-joins back off (50 ms doubling to
//     2 s) when they keep failing; they never spin. An error that retrying
//     cannot cure (recipe.Permanent: another recipe's nodes in the
//     directory, recipe.ErrMixedRecipes, once the next attempt after the
//     backoff meets them too, as for leader.Run; an ACL refusal) is
//     not retried: it ends the participant (logged at error level, its
//     node deleted), Await returns it and listeners get a final Change
//     with it as Cause.
//   - Before leadership is claimed, the engine reads the node's Stat and
//     checks that its ephemeral owner is the current ZooKeeper session
//     (zookeeper.Queue's grant): a node created under an earlier session of
//     the same client is never taken for ours.
//   - Close is final (case C12): it stops the participant, deletes its node,
//     waits for any create still in flight to land and be deleted, gives
//     listeners a final "not leader" and closes their channels. After Close
//     returns nil the participant has no node and never creates one (see
//     Close for the one case, a create whose reply is lost in a connection
//     drop during Close, where the node's delete waits for reconnection).
//   - Closing the Session ends the latch too: leadership ends with
//     recipe.ErrSessionClosed, Await returns that error, listeners get a
//     final "not leader" and are closed.
//
// # Tokens
//
// Every grant of leadership returns a recipe.Lease whose Token is the czxid
// of the node that won: ZooKeeper's ensemble-wide, strictly increasing
// creation zxid, so a later leader always has a larger token than every
// earlier one, also across sessions and across a deleted and re-created
// directory. A grant made again to the same node after RECONNECTED has the
// same token as before the suspension: nobody else can have been granted in
// between, since the node kept its place (fence.Guard accepts an equal
// token). After a session loss the participant's new node has a larger token
// than anything granted before. The lease's Context ends the moment
// leadership does (context.Cause says why: recipe.ErrSuspended,
// recipe.ErrSessionLost, recipe.ErrNodeDeleted, recipe.ErrReleased at
// Close, recipe.ErrSessionClosed). Leadership is a lease, not a fact: a
// leader that pauses can resume after it ended. Guard the resource with the
// token (package fence).
//
// # Permissions
//
// The session needs CREATE and DELETE on the directory (and CREATE on the
// first existing ancestor below the chroot, if the directory must be
// created), READ to list it. Keep the directory for the latch: foreign
// children are ignored, except those imitating this package's node names.
package latch
