// Package fencetest holds the scenarios every fence backend must pass,
// written once and driven through small adapter funcs for the parts that
// are the backend's own (how a write is issued, what it overwrote, how the
// data is read back):
//
//   - [RunAdmit]: fence.Fence's Admit with a batch its write adds to.
//   - [RunHTTP]: the fence behind fencehttp's handler on a real server.
//   - [RunRaiseFloor]: the floor of a new era; [RunFloorCeiling]: the
//     floors no era reaches, refused.
//   - [RunUncertain]: an answer lost after the server applied the write.
//
// The concurrency proof (writers with interleaved tokens, the history checked
// with porcupine) is testkit/nemesis/fencerace, in the nemesis engine's
// module. It is test support: it imports serverkit and testing.
package fencetest
