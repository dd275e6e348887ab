//! Counting datagrams a service drops: undecodable ones by [`DecodeError`] kind, and
//! valid nnb datagrams of a kind the service does not take.

use serde::{Deserialize, Serialize};

use crate::wire::DecodeError;

/// Why a service dropped one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GarbageKind {
    /// Shorter than the header ([`DecodeError::Truncated`]).
    Truncated,
    /// Foreign magic ([`DecodeError::BadMagic`]).
    BadMagic,
    /// Another header version ([`DecodeError::BadVersion`]).
    BadVersion,
    /// Undefined kind byte ([`DecodeError::UnknownKind`]).
    UnknownKind,
    /// Payload length disagreeing with the size ([`DecodeError::LengthMismatch`]).
    LengthMismatch,
    /// A valid header of a kind this service does not serve (e.g. a pong sent to a
    /// reflector, a ping sent to a sink).
    WrongKind,
}

impl From<&DecodeError> for GarbageKind {
    fn from(e: &DecodeError) -> Self {
        match e {
            DecodeError::Truncated(_) => GarbageKind::Truncated,
            DecodeError::BadMagic(_) => GarbageKind::BadMagic,
            DecodeError::BadVersion(_) => GarbageKind::BadVersion,
            DecodeError::UnknownKind(_) => GarbageKind::UnknownKind,
            DecodeError::LengthMismatch { .. } => GarbageKind::LengthMismatch,
        }
    }
}

/// Dropped datagrams by [`GarbageKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GarbageCounts {
    /// See [`GarbageKind::Truncated`].
    pub truncated: u64,
    /// See [`GarbageKind::BadMagic`].
    pub bad_magic: u64,
    /// See [`GarbageKind::BadVersion`].
    pub bad_version: u64,
    /// See [`GarbageKind::UnknownKind`].
    pub unknown_kind: u64,
    /// See [`GarbageKind::LengthMismatch`].
    pub length_mismatch: u64,
    /// See [`GarbageKind::WrongKind`].
    pub wrong_kind: u64,
}

impl GarbageCounts {
    /// Counts one dropped datagram.
    pub fn add(&mut self, kind: GarbageKind) {
        let c = match kind {
            GarbageKind::Truncated => &mut self.truncated,
            GarbageKind::BadMagic => &mut self.bad_magic,
            GarbageKind::BadVersion => &mut self.bad_version,
            GarbageKind::UnknownKind => &mut self.unknown_kind,
            GarbageKind::LengthMismatch => &mut self.length_mismatch,
            GarbageKind::WrongKind => &mut self.wrong_kind,
        };
        *c += 1;
    }

    /// Adds another set of counters to this one.
    pub fn merge(&mut self, o: &GarbageCounts) {
        self.truncated += o.truncated;
        self.bad_magic += o.bad_magic;
        self.bad_version += o.bad_version;
        self.unknown_kind += o.unknown_kind;
        self.length_mismatch += o.length_mismatch;
        self.wrong_kind += o.wrong_kind;
    }

    /// All dropped datagrams.
    pub fn total(&self) -> u64 {
        self.truncated
            + self.bad_magic
            + self.bad_version
            + self.unknown_kind
            + self.length_mismatch
            + self.wrong_kind
    }
}
