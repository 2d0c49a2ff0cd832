//! What a transmit sends: a byte range of an open file, or a shared memory buffer.

use std::fs::File;
use std::sync::Arc;

/// The bytes of one transmit.
#[derive(Clone, Debug)]
pub enum Source {
    /// `len` bytes of `file` from `offset`. The file is read at those offsets; its
    /// position is never used, so one open file can serve many transmits at once.
    File {
        /// The open file.
        file: Arc<File>,
        /// First byte.
        offset: u64,
        /// Byte count.
        len: u64,
    },
    /// A range of an immutable shared buffer.
    Memory {
        /// The buffer.
        buf: Arc<[u8]>,
        /// First byte.
        offset: usize,
        /// Byte count.
        len: usize,
    },
}

impl Source {
    /// The whole of a buffer.
    pub fn memory(buf: Arc<[u8]>) -> Source {
        let len = buf.len();
        Source::Memory {
            buf,
            offset: 0,
            len,
        }
    }

    /// Bytes to send.
    pub fn len(&self) -> u64 {
        match self {
            Source::File { len, .. } => *len,
            Source::Memory { len, .. } => *len as u64,
        }
    }

    /// True when there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
