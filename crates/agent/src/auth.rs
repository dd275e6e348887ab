//! Bearer-token authentication of every agent request.
//!
//! The token is compared in constant time (`subtle`) so that response timing does
//! not reveal how many leading bytes of a guess were right, nor the token's length.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::{error_response, Agent};

/// Bytes of randomness in a generated token (hex-encoded: twice as many characters).
const TOKEN_BYTES: usize = 32;
/// Shortest token a token file may hold: 16 characters, 64 bits of hex at least,
/// beyond online guessing through an agent's request rate.
pub const MIN_TOKEN_LEN: usize = 16;
/// Largest token file read, bytes: a token is a line of tens of characters.
pub const MAX_TOKEN_FILE: u64 = 4096;

/// Why a token could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("cannot read token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The token file is not a regular file (a FIFO, a device, a directory...).
    #[error("token file {path} is a {kind}, not a regular file: write the token in a file")]
    NotAFile {
        /// The file.
        path: String,
        /// What it is instead, e.g. "FIFO" ([`nnb_sys::owned::kind_name`]).
        kind: &'static str,
    },
    /// The token file is larger than any token.
    #[error(
        "token file {path} is larger than {MAX_TOKEN_FILE} bytes: it should hold one line, \
         the token"
    )]
    TooLarge {
        /// The file.
        path: String,
    },
    /// The token file holds no token.
    #[error("token file {path} is empty: write a secret token in it (e.g. 64 hex characters)")]
    Empty {
        /// The file.
        path: String,
    },
    /// The token is too short to be a secret.
    #[error(
        "token file {path} holds a token of {len} characters: use at least {MIN_TOKEN_LEN} \
         (e.g. `openssl rand -hex 32 > {path}`)"
    )]
    TooShort {
        /// The file.
        path: String,
        /// The token's length.
        len: usize,
    },
    /// Other users can read the token file.
    #[error(
        "token file {path} is readable by other users (mode {mode:03o}): the token is a \
         secret; `chmod 600 {path}`"
    )]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
}

/// The secret an agent expects after `Authorization: Bearer `.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token from its text (surrounding whitespace removed). `None` when empty.
    pub fn new(text: &str) -> Option<Token> {
        let t = text.trim();
        (!t.is_empty()).then(|| Token(t.to_string()))
    }

    /// Reads the token from the first line of a file (whitespace trimmed). The file
    /// must be a regular file of at most [`MAX_TOKEN_FILE`] bytes, readable by its
    /// owner only (no group or other permission bits), and the token at least
    /// [`MIN_TOKEN_LEN`] characters long. The file is opened without blocking and
    /// checked once open, so a FIFO neither hangs the agent's start nor is read,
    /// and a device such as `/dev/zero` is refused before a byte is read.
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        use std::io::Read;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let shown = path.display().to_string();
        let read_err = |source| TokenError::Read {
            path: shown.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(read_err)?;
        let meta = file.metadata().map_err(read_err)?;
        if !meta.is_file() {
            return Err(TokenError::NotAFile {
                path: shown,
                kind: nnb_sys::owned::kind_name(&meta),
            });
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TokenError::Exposed { path: shown, mode });
        }
        let too_large = || TokenError::TooLarge {
            path: shown.clone(),
        };
        if meta.len() > MAX_TOKEN_FILE {
            return Err(too_large());
        }
        // Read no more than the limit allows, should the file grow meanwhile.
        let mut bytes = Vec::new();
        file.take(MAX_TOKEN_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        if bytes.len() as u64 > MAX_TOKEN_FILE {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            read_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8 text",
            ))
        })?;
        let first = text.lines().next().unwrap_or("");
        let token = Token::new(first).ok_or(TokenError::Empty {
            path: shown.clone(),
        })?;
        if token.0.chars().count() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort {
                path: shown,
                len: token.0.chars().count(),
            });
        }
        Ok(token)
    }

    /// A fresh random token: 32 bytes from the OS generator, hex-encoded.
    pub fn generate() -> Token {
        let bytes: [u8; TOKEN_BYTES] = rand::random();
        Token(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The token's text, to hand to a client.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether `presented` equals the token. The time taken depends only on the
    /// presented length, not on how much of it matches nor on the token's length.
    pub fn matches(&self, presented: &str) -> bool {
        let (secret, guess) = (self.0.as_bytes(), presented.as_bytes());
        let mut equal = (secret.len() as u64).ct_eq(&(guess.len() as u64));
        for (i, b) in guess.iter().enumerate() {
            // `secret` is never empty (see `Token::new`); cycling it keeps one
            // comparison per presented byte whatever the lengths.
            equal &= b.ct_eq(&secret[i % secret.len()]);
        }
        equal.into()
    }
}

/// Middleware: answers 401 unless the request carries `Authorization: Bearer <token>`.
pub async fn require_token(State(agent): State<Arc<Agent>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(t) if agent.token.matches(t) => next.run(req).await,
        Some(_) => unauthorized("wrong bearer token"),
        None => unauthorized("missing `Authorization: Bearer <token>` header"),
    }
}

fn unauthorized(why: &str) -> Response {
    let mut resp = error_response(StatusCode::UNAUTHORIZED, why);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    resp.into_response()
}

#[cfg(test)]
mod tests {
    use super::Token;

    #[test]
    fn only_the_exact_token_matches() {
        let t = Token::new("  abc123\n").unwrap();
        assert!(t.matches("abc123"));
        for wrong in ["", "abc12", "abc1234", "abc124", "ABC123", "abc123abc123"] {
            assert!(!t.matches(wrong), "{wrong:?}");
        }
        assert!(Token::new(" \n").is_none(), "an empty token is refused");
    }

    /// Reliability review L12: a token file others can read, or a short token, is
    /// refused with a message that says why and how to fix it.
    #[test]
    fn token_files_must_be_private_and_long() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str, mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let good = file("good", "0123456789abcdef\n", 0o600);
        assert!(Token::from_file(&good).unwrap().matches("0123456789abcdef"));
        for mode in [0o644, 0o640, 0o604] {
            let p = file(&format!("m{mode:o}"), "0123456789abcdef\n", mode);
            let err = Token::from_file(&p).unwrap_err().to_string();
            assert!(
                err.contains(&format!("mode {mode:03o}")) && err.contains("chmod 600"),
                "{err}"
            );
        }
        let short = file("short", "abcde\n", 0o600);
        let err = Token::from_file(&short).unwrap_err().to_string();
        assert!(
            err.contains("5 characters") && err.contains("at least 16"),
            "{err}"
        );
        let empty = file("empty", "\n", 0o400);
        assert!(Token::from_file(&empty)
            .unwrap_err()
            .to_string()
            .contains("is empty"));
    }

    /// NL15 (reliability review A8): a FIFO (mode 0600) as the token file hung the
    /// agent's start; `/dev/zero` was read or advised `chmod 600 /dev/zero`; any size
    /// was read whole. Now each is refused at once, saying what it is.
    #[test]
    fn token_files_must_be_small_regular_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        // On a thread, so that a hang fails the test instead of blocking it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(
                Token::from_file(&fifo)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            );
        });
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO token file hangs")
            .unwrap_err();
        assert!(err.contains("is a FIFO, not a regular file"), "{err}");
        for (device, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/urandom", "a character device"),
        ] {
            let err = Token::from_file(std::path::Path::new(device))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("is {kind}, not a regular file")) && !err.contains("chmod"),
                "{err}"
            );
        }
        let err = Token::from_file(dir.path()).unwrap_err().to_string();
        assert!(err.contains("a directory"), "{err}");
        let big = dir.path().join("big");
        let mut text = "0123456789abcdef\n".to_string();
        text.push_str(&"x".repeat(5000));
        std::fs::write(&big, text).unwrap();
        std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = Token::from_file(&big).unwrap_err().to_string();
        assert!(err.contains("larger than 4096 bytes"), "{err}");
    }

    #[test]
    fn generated_tokens_are_long_and_distinct() {
        let (a, b) = (Token::generate(), Token::generate());
        assert_eq!(a.secret().len(), 64);
        assert_ne!(a.secret(), b.secret());
        assert!(a.matches(a.secret()) && !a.matches(b.secret()));
    }
}
