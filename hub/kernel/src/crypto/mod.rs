//! Cryptography of the hub, all on aws-lc-rs (plus argon2 for passwords):
//! random secrets, hashes, constant-time comparison, the master key, envelope
//! encryption under per-subject data keys, and password hashing.

pub mod byok;
pub mod envelope;
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
        let key: [u8; 32] = bytes.try_into().map_err(|_| anyhow!("HUB_MASTER_KEY must be exactly 32 bytes"))?;
        Ok(Self::from_bytes(key))
    }

    pub fn from_bytes(key: [u8; 32]) -> MasterKey {
        // A distinct key for the alias hash, so the hash can never be used to
        // test a guess against anything sealed under the master key itself.
        let alias_key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), b"identity.alias.value_hash");
        MasterKey { key: Zeroizing::new(key), alias_hmac: hmac::Key::new(hmac::HMAC_SHA256, alias_key.as_ref()) }
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

    /// HMAC-SHA256 of `data` under this key (a key kept for signing only).
    pub fn mac(&self, data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, self.key.as_slice()), data).as_ref().to_vec()
    }

    /// The key itself, for a MAC key whose verifiers must hold it (never
    /// call this on a key that seals anything).
    pub fn reveal(&self) -> &[u8; 32] {
        &self.key
    }
}

/// AES-256-GCM: `nonce (12) || ciphertext || tag (16)`.
pub fn seal(key: &[u8; 32], plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_256_GCM, key).expect("32-byte key"));
    let nonce_bytes: [u8; 12] = random_bytes(12).try_into().expect("12 bytes");
    let mut buf = plaintext.to_vec();
    key.seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce_bytes), aead::Aad::from(aad), &mut buf).expect("AES-GCM seal");
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
    let plain = key.open_in_place(nonce, aead::Aad::from(aad), &mut buf).map_err(|_| anyhow!("sealed value failed authentication"))?;
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

    /// Loads a data key; `None` once it has been destroyed. A key wrapped
    /// under a customer-managed key (BYOK) opens only while that key's
    /// grant is active: otherwise the error is [`byok::NotGranted`].
    pub async fn load<'e, E>(exec: E, master: &MasterKey, key_id: &str) -> anyhow::Result<Option<DataKey>>
    where
        E: sqlx::Executor<'e, Database = sqlx::Any>,
    {
        type Row = (Option<Vec<u8>>, Option<String>, Option<Vec<u8>>, Option<String>);
        let row: Option<Row> = sqlx::query_as(
            "SELECT d.wrapped_key, d.wrapped_by, k.kek_sealed, b.grant_status FROM crypto_data_key d \
             LEFT JOIN crypto_byok_key k ON k.tenant_key_id = d.wrapped_by LEFT JOIN crypto_byok_binding b ON b.binding_id = k.binding_id \
             WHERE d.key_id = $1",
        )
        .bind(key_id)
        .fetch_optional(exec)
        .await?;
        let Some((Some(wrapped), wrapped_by, kek, grant)) = row else { return Ok(None) };
        let key = match wrapped_by {
            None => master.open(&wrapped, key_id.as_bytes())?,
            Some(tenant_key_id) => {
                let (Some(kek), Some("active")) = (kek, grant.as_deref()) else { return Err(byok::NotGranted(tenant_key_id).into()) };
                let kek = byok::open_kek(master, &tenant_key_id, &kek)?;
                open(&kek, &wrapped, key_id.as_bytes())?
            }
        };
        let key: [u8; 32] = key.try_into().map_err(|_| anyhow!("data key has the wrong length"))?;
        Ok(Some(DataKey { key_id: key_id.to_string(), key: Zeroizing::new(key) }))
    }

    /// Creates a data key of a tenant: wrapped under the key of its active
    /// customer-managed key binding when it has one, otherwise under the
    /// master key. A tenant whose latest binding's grant is revoked gets
    /// no new key (409 `UndecryptableError`).
    pub async fn create_for_tenant(tx: &mut Tx, master: &MasterKey, tenant_id: &str) -> crate::error::ApiResult<DataKey> {
        let kek = byok::tenant_kek(tx, master, tenant_id).await?;
        let key_id = db::new_id();
        let key: [u8; 32] = random_bytes(32).try_into().expect("32 bytes");
        let (wrapped, wrapped_by) = match &kek {
            Some((tenant_key_id, kek)) => (seal(kek, &key, key_id.as_bytes()), Some(tenant_key_id.as_str())),
            None => (master.seal(&key, key_id.as_bytes()), None),
        };
        sqlx::query("INSERT INTO crypto_data_key (key_id, wrapped_key, created_at, tenant_id, wrapped_by) VALUES ($1, $2, $3, $4, $5)")
            .bind(&key_id)
            .bind(wrapped)
            .bind(db::now())
            .bind(tenant_id)
            .bind(wrapped_by)
            .execute(&mut **tx)
            .await?;
        Ok(DataKey { key_id, key: Zeroizing::new(key) })
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

    /// HMAC-SHA256 of `data` under this key (a key kept for signing only).
    pub fn mac(&self, data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, self.key.as_slice()), data).as_ref().to_vec()
    }

    /// The key itself, for a MAC key whose verifiers must hold it (never
    /// call this on a key that seals anything).
    pub fn reveal(&self) -> &[u8; 32] {
        &self.key
    }
}

/// Password hashing with argon2id (the crate's defaults: 19 MiB, t=2, p=1).
///
/// Hashes run on a fixed set of hashing threads, one per core but one, plus
/// one kept for clean logins, and each thread reuses its 19 MiB of argon2 memory
/// from one hash to the next: however many clients send passwords at once,
/// the hub holds at most that many blocks of hashing memory, and allocates
/// none per request. A few callers wait for a thread; beyond that queue, or
/// after waiting too long, the caller is told to come back (`Busy`,
/// answered 503 with `Retry-After`).
pub mod password {
    use std::{
        sync::{
            LazyLock, Mutex,
            atomic::{AtomicUsize, Ordering},
            mpsc,
        },
        time::Duration,
    };

    use anyhow::Context;
    use argon2::{
        Algorithm, Argon2, Block, Params, Version,
        password_hash::{Output, ParamsString, PasswordHash, SaltString, rand_core::OsRng},
    };
    use tokio::sync::{Semaphore, SemaphorePermit, oneshot};
    use zeroize::Zeroizing;

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
        /// A login to an existing account from an address, for an account,
        /// with no failures on record: besides the shared threads it may
        /// take the one kept for such logins, so a flood of guesses cannot
        /// keep a clean login waiting behind it.
        Clean,
    }

    /// Shared hashing threads.
    static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(shared_slots()));
    /// The extra thread of the clean lane.
    static CLEAN_SLOT: Semaphore = Semaphore::const_new(1);
    /// Callers waiting for a slot, per lane.
    static WAITING: AtomicUsize = AtomicUsize::new(0);
    static WAITING_CLEAN: AtomicUsize = AtomicUsize::new(0);
    /// Callers allowed to wait, per slot: a wait stays well under a second.
    const QUEUE_PER_SLOT: usize = 16;
    /// The longest wait for a slot.
    const MAX_WAIT: Duration = Duration::from_secs(1);

    /// One per core but one, so that HTTP work and a clean login always
    /// find a core however many guesses are hashing; at least one.
    fn shared_slots() -> usize {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).saturating_sub(1).max(1)
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
            Lane::Shared => (&WAITING, shared_slots() * QUEUE_PER_SLOT),
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

    /// Whether a shared-lane caller would be refused now (no free thread
    /// and a full queue): lets a route refuse a flood before any other
    /// work. Only a hint: `hash` and `verify` decide.
    pub fn saturated() -> bool {
        SLOTS.available_permits() == 0 && WAITING.load(Ordering::Acquire) >= shared_slots() * QUEUE_PER_SLOT
    }

    enum Work {
        Hash(Zeroizing<String>),
        Verify(Zeroizing<String>, String),
    }

    enum Done {
        Hashed(String),
        Verified(bool),
    }

    struct Job {
        work: Work,
        reply: oneshot::Sender<anyhow::Result<Done>>,
    }

    /// The hashing threads, started on first use. Admission through the
    /// semaphores keeps at most one job per thread in the channel.
    static WORKERS: LazyLock<mpsc::Sender<Job>> = LazyLock::new(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        for i in 0..shared_slots() + 1 {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || {
                    let mut memory = Vec::new();
                    loop {
                        let job = match rx.lock().expect("password job queue").recv() {
                            Ok(job) => job,
                            Err(_) => return,
                        };
                        let done = match job.work {
                            Work::Hash(password) => hash_with(&mut memory, &password).map(Done::Hashed),
                            Work::Verify(password, stored) => verify_with(&mut memory, &password, &stored).map(Done::Verified),
                        };
                        let _ = job.reply.send(done);
                    }
                })
                .expect("starting a hashing thread");
        }
        tx
    });

    /// Runs `work` on a hashing thread once a slot is free.
    async fn run(lane: Lane, work: Work) -> Result<Done, Error> {
        let _slot = slot(lane).await?;
        let (reply, answer) = oneshot::channel();
        WORKERS.send(Job { work, reply }).map_err(|_| anyhow::anyhow!("the hashing threads are gone"))?;
        Ok(answer.await.map_err(|_| anyhow::anyhow!("a hashing thread dropped its job"))??)
    }

    /// argon2 into `out` with `memory` as the work area, grown to the
    /// parameters' size once and then reused.
    fn compute(memory: &mut Vec<Block>, argon: &Argon2, password: &[u8], salt: &[u8], out: &mut [u8]) -> anyhow::Result<()> {
        memory.resize(argon.params().block_count(), Block::default());
        argon.hash_password_into_with_memory(password, salt, out, memory.as_mut_slice()).map_err(|e| anyhow::anyhow!("argon2: {e}"))
    }

    fn hash_with(memory: &mut Vec<Block>, password: &str) -> anyhow::Result<String> {
        let argon = Argon2::default();
        let salt = SaltString::generate(&mut OsRng);
        let mut salt_bytes = [0u8; 64];
        let salt_bytes = salt.as_salt().decode_b64(&mut salt_bytes).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
        let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
        compute(memory, &argon, password.as_bytes(), salt_bytes, &mut out)?;
        let phc = PasswordHash {
            algorithm: Algorithm::Argon2id.ident(),
            version: Some(Version::V0x13.into()),
            params: ParamsString::try_from(argon.params()).map_err(|e| anyhow::anyhow!("params: {e}"))?,
            salt: Some(salt.as_salt()),
            hash: Some(Output::new(&out).map_err(|e| anyhow::anyhow!("output: {e}"))?),
        };
        Ok(phc.to_string())
    }

    fn verify_with(memory: &mut Vec<Block>, password: &str, stored: &str) -> anyhow::Result<bool> {
        let parsed = PasswordHash::new(stored).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let algorithm = Algorithm::try_from(parsed.algorithm).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let version = match parsed.version {
            Some(v) => Version::try_from(v).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?,
            None => Version::default(),
        };
        let params = Params::try_from(&parsed).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let expected = parsed.hash.context("stored hash has no output")?;
        let salt = parsed.salt.context("stored hash has no salt")?;
        let mut salt_bytes = [0u8; 64];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(|e| anyhow::anyhow!("stored salt: {e}"))?;
        let mut out = vec![0u8; expected.len()];
        compute(memory, &Argon2::new(algorithm, version, params), password.as_bytes(), salt_bytes, &mut out)?;
        // `Output` compares in constant time.
        Ok(Output::new(&out).map_err(|e| anyhow::anyhow!("output: {e}"))? == expected)
    }

    /// Hashes a new password.
    pub async fn hash(password: String) -> Result<String, Error> {
        match run(Lane::Shared, Work::Hash(Zeroizing::new(password))).await? {
            Done::Hashed(h) => Ok(h),
            Done::Verified(_) => unreachable!("a hash job answers a hash"),
        }
    }

    /// Verifies a password. With no stored hash, a dummy hash is checked
    /// so an unknown email costs the same work as a wrong password.
    pub async fn verify(lane: Lane, password: String, stored: Option<String>) -> Result<bool, Error> {
        let stored = stored.unwrap_or_else(|| DUMMY.to_string());
        match run(lane, Work::Verify(Zeroizing::new(password), stored)).await? {
            Done::Verified(v) => Ok(v),
            Done::Hashed(_) => unreachable!("a verify job answers a verdict"),
        }
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
        // The hashing threads' PHC strings are the argon2 crate's, both ways.
        use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier, password_hash::SaltString};
        let ours = password::hash("correct horse".into()).await.unwrap();
        assert!(Argon2::default().verify_password(b"correct horse", &PasswordHash::new(&ours).unwrap()).is_ok());
        let salt = SaltString::encode_b64(b"a fixed test salt").unwrap();
        let theirs = Argon2::default().hash_password(b"battery staple", &salt).unwrap().to_string();
        assert!(password::verify(password::Lane::Shared, "battery staple".into(), Some(theirs.clone())).await.unwrap());
        assert!(!password::verify(password::Lane::Shared, "battery stapler".into(), Some(theirs)).await.unwrap());
    }
}
