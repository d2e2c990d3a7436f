// Package fencetest holds the scenarios every fence backend must pass,
// written once and driven through small adapter funcs for the parts that
// are the backend's own (how a write is issued, what it overwrote, how the
// data is read back):
//
//   - [Run] and [Verify]: the concurrency proof. Writers with interleaved
//     tokens (older, equal, newer) write one register; every call and its
//     answer is a nemesis.Op, and the history must pass
//     nemesis.CheckRegister (no write over a higher token, no lost update,
//     each accepted write over the state the previous one left, and
//     linearizable with porcupine), with the final state the last accepted
//     write. A planted bug run through the same two must fail them.
//   - [RunAdmit]: fence.Fence's Admit with a batch its write adds to.
//   - [RunHTTP]: the fence behind fencehttp's handler on a real server.
//   - [RunRaiseFloor]: the floor of a new era; [RunFloorCeiling]: the
//     floors no era reaches, refused.
//   - [RunUncertain]: an answer lost after the server applied the write.
//
// It is test support: it imports zktest, testkit/nemesis and testing.
package fencetest
