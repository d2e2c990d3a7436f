// Package group is group membership on ZooKeeper (Curator's GroupMember
// over a PersistentNode in ephemeral mode, kazoo's Party): each member
// registers under a unique id with some data, its registration lives while
// the process does, and anyone can read the group, or watch it, as the
// server held it. It implements recipe.Group (testkit/grouptest checks it).
//
// # Recipe
//
// A member is a node of a Queue (package zookeeper) under the group's
// directory: ephemeral, sequential, with a protected name
// ("_c_<guid>-member-<sequence>"), carrying the id, a newline and the data.
// The create is the engine's: a lost reply never leaves a second node, a
// failed or cancelled Join leaves none, and a node is adopted only if the
// current session owns it. Every node holds at once: the member's
// registration is the lease of its node, so Registered's context ends as
// every ZooKeeper lease does (at SUSPENDED under the Session's suspend
// policy, at session loss, when the node is deleted). After a suspension
// healed in the same ZooKeeper session the same node is registered again;
// after a session loss (or the node's deletion) a new node is made, with
// the member's latest data. An id belongs to its oldest live node: a Join,
// or a registration made again, whose node is not the oldest of its id
// deletes it (recipe.ErrMemberExists; a member keeps retrying, with
// backoff, until the older node is gone).
//
// Update writes the node with its data version (Ticket.SetData): another
// writer's change makes it fail with recipe.ErrConflict, and a write whose
// reply was lost, or whose caller's ctx ended after the send, is settled
// (by reading the node, or by the next Update).
//
// Children of the directory that are not member nodes are left out of the
// views, except nodes of another recipe of this module (a lock's "-lock-"
// node): as for every recipe, they make Members, Watch and Join fail with
// recipe.ErrMixedRecipes (one recipe per directory).
//
// Members and Watch read the group at one point of the server's order
// (Queue.Snapshot: the directory and its nodes read twice over, taken when
// nothing changed in between); a View's Rev is the zxid of the group's last
// change, and Watch never delivers one below the last it delivered.
//
// # When a member ends: the numbers
//
// A live member cut off from ZooKeeper sees Registered's context end at
// SUSPENDED: within 2/3 of the session timeout of the last server reply
// under the default suspend policy (docs/backends.md). The server drops
// its node only when the session expires, a full session timeout after the
// last request it received; so the member knows before anyone else can see
// it gone. A killed member's node stays visible for that session timeout.
package group
