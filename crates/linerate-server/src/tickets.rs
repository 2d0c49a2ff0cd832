//! TLS session tickets that outlive a reload and are shared by instances
//! (docs/operations.md, "Session tickets").
//!
//! - **No file**: one ticketer for the process, rustls' own (ChaCha20-Poly1305, keys
//!   made at random and rotated every 6 hours, the one before still accepted), made at
//!   the first start and kept by every generation after, so a reload costs no client
//!   its resumption.
//! - **`tls-ticket-keys = FILE`**: 48 or 80 random bytes (`openssl rand 80`, nginx's
//!   size), the same file on every instance: the first 16 name the key, the next 32
//!   are a ChaCha20-Poly1305 key (the last 32 of an 80-byte file are not used). A
//!   ticket is the key's name, a random 96-bit nonce and the sealed session, the name
//!   as associated data. Rotation is replacing the file and reloading: the process
//!   still opens tickets of the [`KEPT_BEFORE`] keys it loaded before, so instances
//!   reloaded one after another never refuse each other's tickets.
//!
//! Written here rather than taken from rustls: its ticketers make their keys at random
//! and offer no way to give one. The sealing is ring's AEAD.

use std::path::Path;
use std::sync::{Arc, Mutex};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

/// Keys loaded before the file's present one that still open tickets.
pub(crate) const KEPT_BEFORE: usize = 2;

/// The lifetime clients are told (seconds): the rotation is the operator's.
const LIFETIME: u32 = 12 * 60 * 60;

const NAME_LEN: usize = 16;
const TAG_LEN: usize = 16;

/// One key: its name and its AEAD key's bytes.
#[derive(Clone, PartialEq, Eq)]
struct KeyBytes {
    name: [u8; NAME_LEN],
    key: [u8; 32],
}

/// What the process remembers across generations.
#[derive(Default)]
struct Remembered {
    /// The ticketer of a server without a file.
    random: Option<Arc<dyn ProducesTickets>>,
    /// The keys loaded from files, oldest first, the present one last.
    loaded: Vec<KeyBytes>,
}

static REMEMBERED: Mutex<Remembered> = Mutex::new(Remembered {
    random: None,
    loaded: Vec::new(),
});

/// The ticketer of a generation: from `file` (`tls-ticket-keys`), or the process's own.
/// Errors name the key and the file.
pub(crate) fn ticketer(file: Option<&Path>) -> Result<Arc<dyn ProducesTickets>, String> {
    let mut r = REMEMBERED.lock().unwrap_or_else(|p| p.into_inner());
    let Some(path) = file else {
        if let Some(t) = &r.random {
            return Ok(Arc::clone(t));
        }
        let t = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("TLS: {e}"))?;
        r.random = Some(Arc::clone(&t));
        return Ok(t);
    };
    let what = || format!("tls-ticket-keys {}", path.display());
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", what()))?;
    let key = parse(&bytes).map_err(|e| format!("{}: {e}", what()))?;
    if r.loaded.last() != Some(&key) {
        r.loaded.retain(|k| *k != key);
        r.loaded.push(key);
        let extra = r.loaded.len().saturating_sub(KEPT_BEFORE + 1);
        r.loaded.drain(..extra);
    }
    Ok(Arc::new(FileTicketer::new(&r.loaded)))
}

fn parse(bytes: &[u8]) -> Result<KeyBytes, String> {
    if bytes.len() != 48 && bytes.len() != 80 {
        return Err(format!(
            "{} bytes: 48 or 80 random bytes are a key (openssl rand 80 > FILE)",
            bytes.len()
        ));
    }
    let mut k = KeyBytes {
        name: [0; NAME_LEN],
        key: [0; 32],
    };
    k.name.copy_from_slice(&bytes[..NAME_LEN]);
    k.key.copy_from_slice(&bytes[NAME_LEN..NAME_LEN + 32]);
    Ok(k)
}

/// Tickets sealed with a file's key; those of the keys before it opened too.
struct FileTicketer {
    /// The present key first.
    keys: Vec<([u8; NAME_LEN], LessSafeKey)>,
    rng: SystemRandom,
}

impl std::fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTicketer")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl FileTicketer {
    /// From `loaded`, oldest first.
    fn new(loaded: &[KeyBytes]) -> FileTicketer {
        let keys = loaded
            .iter()
            .rev()
            .map(|k| {
                // A 32-byte key is what ChaCha20-Poly1305 takes: cannot fail.
                let unbound = UnboundKey::new(&CHACHA20_POLY1305, &k.key)
                    .unwrap_or_else(|_| unreachable!("a 32-byte ChaCha20-Poly1305 key"));
                (k.name, LessSafeKey::new(unbound))
            })
            .collect();
        FileTicketer {
            keys,
            rng: SystemRandom::new(),
        }
    }
}

impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let (name, key) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(name),
            &mut sealed,
        )
        .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < NAME_LEN + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (name, rest) = cipher.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let (_, key) = self.keys.iter().find(|(n, _)| n[..] == *name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key.open_in_place(nonce, Aad::from(name), &mut buf).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: u8) -> KeyBytes {
        parse(&[fill; 80]).unwrap()
    }

    #[test]
    fn a_ticket_opens_under_its_key_and_the_keys_after_it_but_nowhere_else() {
        let a = FileTicketer::new(&[key(1)]);
        let t = a.encrypt(b"session").unwrap();
        assert_eq!(a.decrypt(&t).as_deref(), Some(&b"session"[..]));
        // Another instance with the same file.
        assert_eq!(
            FileTicketer::new(&[key(1)]).decrypt(&t).as_deref(),
            Some(&b"session"[..])
        );
        // Rotated: the key before still opens it; new tickets are under the new key.
        let b = FileTicketer::new(&[key(1), key(2)]);
        assert_eq!(b.decrypt(&t).as_deref(), Some(&b"session"[..]));
        assert!(a.decrypt(&b.encrypt(b"x").unwrap()).is_none());
        // Another key, a changed byte anywhere, a short ticket: refused.
        assert!(FileTicketer::new(&[key(3)]).decrypt(&t).is_none());
        for i in [0, NAME_LEN, NAME_LEN + NONCE_LEN, t.len() - 1] {
            let mut bad = t.clone();
            bad[i] ^= 1;
            assert!(a.decrypt(&bad).is_none(), "byte {i} changed");
        }
        assert!(a
            .decrypt(&t[..NAME_LEN + NONCE_LEN + TAG_LEN - 1])
            .is_none());
        assert!(a.decrypt(&[]).is_none());
    }

    #[test]
    fn key_files_are_48_or_80_bytes() {
        assert!(parse(&[0; 48]).is_ok() && parse(&[0; 80]).is_ok());
        for n in [0, 32, 47, 79, 81] {
            let e = parse(&vec![0; n]).err().unwrap();
            assert!(e.contains(&format!("{n} bytes")), "{e}");
        }
    }
}
