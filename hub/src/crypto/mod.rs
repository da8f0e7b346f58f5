//! Cryptography of the hub, all on aws-lc-rs (plus argon2 for passwords):
//! random secrets, hashes, constant-time comparison, the master key, envelope
//! encryption under per-subject data keys, and password hashing.

pub mod signing;

use anyhow::{Context, anyhow};
use aws_lc_rs::{aead, digest, hmac, rand::SecureRandom};
use zeroize::Zeroizing;

use crate::db::{self, Tx};

/// `n` bytes from the operating system's CSPRNG.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut buf).expect("system random source");
    buf
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A random secret of at least `bytes` bytes of entropy, in base62.
///
/// Each character carries log2(62) ≈ 5.95 bits; rejection sampling keeps
/// every character uniform.
pub fn random_base62(bytes: usize) -> String {
    let chars = (bytes * 8).div_ceil(5); // 5 bits per char is a safe floor
    let mut out = String::with_capacity(chars);
    while out.len() < chars {
        for b in random_bytes(chars) {
            // 248 = 4 * 62: values above bias the distribution.
            if b < 248 && out.len() < chars {
                out.push(BASE62[(b % 62) as usize] as char);
            }
        }
    }
    out
}

pub fn sha256(data: &[u8]) -> Vec<u8> {
    digest::digest(&digest::SHA256, data).as_ref().to_vec()
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(sha256(data))
}

/// Compares two secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a, b).is_ok()
}

/// The key that wraps every data key and signing key. Never logged, never
/// stored in the database.
pub struct MasterKey {
    key: Zeroizing<[u8; 32]>,
    alias_hmac: hmac::Key,
}

impl MasterKey {
    /// Parses 32 bytes given as 64 hex characters or base64.
    pub fn parse(text: &str) -> anyhow::Result<MasterKey> {
        use base64::Engine;
        let text = text.trim();
        let bytes = hex::decode(text)
            .ok()
            .or_else(|| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .ok_or_else(|| anyhow!("HUB_MASTER_KEY must be 32 bytes as hex or base64"))?;
        let key: [u8; 32] =
            bytes.try_into().map_err(|_| anyhow!("HUB_MASTER_KEY must be exactly 32 bytes"))?;
        Ok(Self::from_bytes(key))
    }

    pub fn from_bytes(key: [u8; 32]) -> MasterKey {
        // A distinct key for the alias hash, so the hash can never be used to
        // test a guess against anything sealed under the master key itself.
        let alias_key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), b"identity.alias.value_hash");
        MasterKey {
            key: Zeroizing::new(key),
            alias_hmac: hmac::Key::new(hmac::HMAC_SHA256, alias_key.as_ref()),
        }
    }

    /// Loads the master key from settings, or in development mode from (or
    /// into) `master.key` in the data directory.
    pub fn load(configured: Option<&str>, data_dir: &std::path::Path, dev: bool) -> anyhow::Result<MasterKey> {
        if let Some(text) = configured.filter(|t| !t.trim().is_empty()) {
            return Self::parse(text);
        }
        if !dev {
            anyhow::bail!("HUB_MASTER_KEY is required outside development mode (HUB_DEV)");
        }
        let path = data_dir.join("master.key");
        if path.exists() {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            return Self::parse(&text);
        }
        tracing::warn!(path = %path.display(), "development mode: created a master key on disk; set HUB_MASTER_KEY in production");
        let key: [u8; 32] = random_bytes(32).try_into().expect("32 bytes");
        std::fs::write(&path, hex::encode(key)).with_context(|| format!("writing {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(Self::from_bytes(key))
    }

    /// Keyed hash of a normalised alias value (the uniqueness key of an email).
    pub fn alias_hash(&self, kind: &str, value: &str) -> String {
        let mut ctx = hmac::Context::with_key(&self.alias_hmac);
        ctx.update(kind.as_bytes());
        ctx.update(b"\0");
        ctx.update(value.as_bytes());
        hex::encode(ctx.sign().as_ref())
    }

    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        seal(&self.key, plaintext, aad)
    }

    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
        open(&self.key, sealed, aad)
    }
}

/// AES-256-GCM: `nonce (12) || ciphertext || tag (16)`.
pub fn seal(key: &[u8; 32], plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_256_GCM, key).expect("32-byte key"));
    let nonce_bytes: [u8; 12] = random_bytes(12).try_into().expect("12 bytes");
    let mut buf = plaintext.to_vec();
    key.seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce_bytes), aead::Aad::from(aad), &mut buf)
        .expect("AES-GCM seal");
    let mut out = nonce_bytes.to_vec();
    out.extend_from_slice(&buf);
    out
}

pub fn open(key: &[u8; 32], sealed: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
    if sealed.len() < 12 + 16 {
        anyhow::bail!("sealed value too short");
    }
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_256_GCM, key).expect("32-byte key"));
    let (nonce, body) = sealed.split_at(12);
    let nonce = aead::Nonce::try_assume_unique_for_key(nonce).map_err(|_| anyhow!("bad nonce"))?;
    let mut buf = body.to_vec();
    let plain = key
        .open_in_place(nonce, aead::Aad::from(aad), &mut buf)
        .map_err(|_| anyhow!("sealed value failed authentication"))?;
    Ok(plain.to_vec())
}

/// A per-subject data key (a person's or a persona's). Destroying it
/// crypto-shreds everything sealed under it.
pub struct DataKey {
    pub key_id: String,
    key: Zeroizing<[u8; 32]>,
}

impl DataKey {
    /// Creates a data key and stores it wrapped under the master key.
    pub async fn create(tx: &mut Tx, master: &MasterKey) -> Result<DataKey, sqlx::Error> {
        let key_id = db::new_id();
        let key: [u8; 32] = random_bytes(32).try_into().expect("32 bytes");
        let wrapped = master.seal(&key, key_id.as_bytes());
        sqlx::query("INSERT INTO crypto_data_key (key_id, wrapped_key, created_at) VALUES ($1, $2, $3)")
            .bind(&key_id)
            .bind(wrapped)
            .bind(db::now())
            .execute(&mut **tx)
            .await?;
        Ok(DataKey { key_id, key: Zeroizing::new(key) })
    }

    /// Loads a data key; `None` once it has been destroyed.
    pub async fn load<'e, E>(exec: E, master: &MasterKey, key_id: &str) -> anyhow::Result<Option<DataKey>>
    where
        E: sqlx::Executor<'e, Database = sqlx::Any>,
    {
        let wrapped: Option<Option<Vec<u8>>> =
            sqlx::query_scalar("SELECT wrapped_key FROM crypto_data_key WHERE key_id = $1")
                .bind(key_id)
                .fetch_optional(exec)
                .await?;
        let Some(Some(wrapped)) = wrapped else { return Ok(None) };
        let key: [u8; 32] = master
            .open(&wrapped, key_id.as_bytes())?
            .try_into()
            .map_err(|_| anyhow!("data key has the wrong length"))?;
        Ok(Some(DataKey { key_id: key_id.to_string(), key: Zeroizing::new(key) }))
    }

    /// Destroys a data key: the wrapped key is erased, so nothing sealed
    /// under it can be opened again.
    pub async fn destroy(tx: &mut Tx, key_id: &str) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE crypto_data_key SET wrapped_key = NULL, destroyed_at = $2 WHERE key_id = $1 AND wrapped_key IS NOT NULL")
            .bind(key_id)
            .bind(db::now())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        seal(&self.key, plaintext, aad)
    }

    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
        open(&self.key, sealed, aad)
    }
}

/// Password hashing with argon2id (the crate's defaults: 19 MiB, t=2, p=1).
///
/// Each hash holds 19 MiB while it runs, so the number in flight is bounded
/// by a semaphore sized to the cores: memory stays flat however many
/// clients send passwords at once. A few callers wait for a turn; beyond
/// that queue, or after waiting too long, the caller is told to come back
/// (`Busy`, answered 503 with `Retry-After`).
pub mod password {
    use std::{
        sync::{
            LazyLock,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use argon2::{
        Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
        password_hash::{SaltString, rand_core::OsRng},
    };
    use tokio::sync::{Semaphore, SemaphorePermit};

    /// Why a password operation did not run or failed.
    #[derive(Debug, thiserror::Error)]
    pub enum Error {
        /// Too many password operations are in flight or waiting.
        #[error("too many password checks in progress")]
        Busy,
        #[error(transparent)]
        Failed(#[from] anyhow::Error),
    }

    /// Which queue a password operation waits in.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Lane {
        /// Everyone.
        Shared,
        /// A login from an address, for an account, with no failures on
        /// record: besides the shared slots it may take one slot kept for
        /// such logins, so a flood of guesses cannot keep a clean login
        /// waiting behind it.
        Clean,
    }

    /// Hashes that may run at once: one per core.
    static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(slots()));
    /// The extra slot of the clean lane.
    static CLEAN_SLOT: Semaphore = Semaphore::const_new(1);
    /// Callers waiting for a slot, per lane.
    static WAITING: AtomicUsize = AtomicUsize::new(0);
    static WAITING_CLEAN: AtomicUsize = AtomicUsize::new(0);
    /// Callers allowed to wait for a slot, per slot.
    const QUEUE_PER_SLOT: usize = 64;
    /// The longest wait for a slot.
    const MAX_WAIT: Duration = Duration::from_secs(2);

    fn slots() -> usize {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }

    /// Waits for a hashing slot, or refuses when the lane's queue is full
    /// or the wait too long.
    async fn slot(lane: Lane) -> Result<SemaphorePermit<'static>, Error> {
        if let Ok(permit) = SLOTS.try_acquire() {
            return Ok(permit);
        }
        if lane == Lane::Clean
            && let Ok(permit) = CLEAN_SLOT.try_acquire()
        {
            return Ok(permit);
        }
        let (waiting, bound) = match lane {
            Lane::Shared => (&WAITING, slots() * QUEUE_PER_SLOT),
            Lane::Clean => (&WAITING_CLEAN, QUEUE_PER_SLOT),
        };
        if waiting.fetch_add(1, Ordering::AcqRel) >= bound {
            waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::Busy);
        }
        let waited = tokio::time::timeout(MAX_WAIT, async {
            match lane {
                Lane::Shared => SLOTS.acquire().await,
                Lane::Clean => tokio::select! {
                    p = SLOTS.acquire() => p,
                    p = CLEAN_SLOT.acquire() => p,
                },
            }
        })
        .await;
        waiting.fetch_sub(1, Ordering::AcqRel);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(Error::Busy),
        }
    }

    /// Runs `f` on a blocking thread while holding a slot.
    async fn run<T: Send + 'static>(lane: Lane, f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> Result<T, Error> {
        let _slot = slot(lane).await?;
        Ok(tokio::task::spawn_blocking(f).await.map_err(anyhow::Error::from)??)
    }

    /// Hashes on a blocking thread: argon2 is deliberately slow.
    pub async fn hash(password: String) -> Result<String, Error> {
        run(Lane::Shared, move || {
            let salt = SaltString::generate(&mut OsRng);
            Argon2::default()
                .hash_password(password.as_bytes(), &salt)
                .map(|h| h.to_string())
                .map_err(|e| anyhow::anyhow!("hashing password: {e}"))
        })
        .await
    }

    /// Verifies on a blocking thread. With no stored hash, a dummy hash is
    /// checked so an unknown email costs the same time as a wrong password.
    pub async fn verify(lane: Lane, password: String, stored: Option<String>) -> Result<bool, Error> {
        run(lane, move || {
            let stored = stored.unwrap_or_else(|| DUMMY.to_string());
            let parsed = PasswordHash::new(&stored).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
            Ok(Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        })
        .await
    }

    /// argon2id of a random password, with the default parameters.
    const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$HYxQyJbCjiR2rFBvOSg7Kgkx7nFnyv5uVp1sX6sqk+U";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_aad() {
        let k1 = [7u8; 32];
        let k2 = [8u8; 32];
        let sealed = seal(&k1, b"secret", b"aad");
        assert_eq!(open(&k1, &sealed, b"aad").unwrap(), b"secret");
        assert!(open(&k2, &sealed, b"aad").is_err());
        assert!(open(&k1, &sealed, b"other").is_err());
    }

    #[test]
    fn base62_secrets_have_the_requested_entropy_and_alphabet() {
        let s = random_base62(32);
        assert!(s.len() >= 43, "{s}");
        assert!(s.bytes().all(|b| BASE62.contains(&b)));
        assert_ne!(random_base62(32), s);
    }

    #[test]
    fn alias_hash_is_keyed_and_stable() {
        let a = MasterKey::from_bytes([1u8; 32]);
        let b = MasterKey::from_bytes([2u8; 32]);
        assert_eq!(a.alias_hash("email", "x@y.z"), a.alias_hash("email", "x@y.z"));
        assert_ne!(a.alias_hash("email", "x@y.z"), b.alias_hash("email", "x@y.z"));
    }

    #[tokio::test]
    async fn password_hashes_verify_only_the_right_password() {
        let h = password::hash("correct horse".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(password::verify(password::Lane::Shared, "correct horse".into(), Some(h.clone())).await.unwrap());
        assert!(!password::verify(password::Lane::Clean, "wrong".into(), Some(h)).await.unwrap());
        assert!(!password::verify(password::Lane::Shared, "anything".into(), None).await.unwrap());
    }
}
