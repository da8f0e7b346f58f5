//! The object store behind sdk-media, from `HUB_MEDIA_STORE`: the local
//! filesystem under the data dir by default, or an S3-compatible bucket.
//! Several hub replicas need a store they all reach (S3): a local
//! directory is one machine's.

use std::sync::Arc;

use anyhow::{Context, bail};
use object_store::{ObjectStore, aws::AmazonS3Builder, local::LocalFileSystem, prefix::PrefixStore};

use crate::config::Config;

pub fn open(config: &Config) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let setting = config.media_store.trim();
    if setting == "file" || setting.is_empty() {
        return local(&config.data_dir.join("media"));
    }
    if let Some(path) = setting.strip_prefix("file://") {
        return local(std::path::Path::new(path));
    }
    if let Some(rest) = setting.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            bail!("HUB_MEDIA_STORE: s3://bucket[/prefix] names no bucket");
        }
        let s3 = AmazonS3Builder::from_env().with_bucket_name(bucket).build().context("HUB_MEDIA_STORE: the S3 store")?;
        let prefix = prefix.trim_matches('/');
        return Ok(if prefix.is_empty() { Arc::new(s3) } else { Arc::new(PrefixStore::new(s3, prefix)) });
    }
    bail!("HUB_MEDIA_STORE must be file, file:///absolute/path or s3://bucket[/prefix]")
}

fn local(dir: &std::path::Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating the media directory {}", dir.display()))?;
    Ok(Arc::new(LocalFileSystem::new_with_prefix(dir).context("HUB_MEDIA_STORE: the media directory")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(store: &str) -> Config {
        let mut c = Config::for_tests(std::env::temp_dir().join(format!("hub-storage-{}", uuid::Uuid::now_v7())), None);
        c.media_store = store.into();
        c
    }

    #[test]
    fn the_setting_names_a_store_or_is_refused() {
        assert!(open(&config("file")).is_ok());
        assert!(open(&config("s3://media-bucket/tenants")).is_ok(), "building an S3 store reaches no network");
        for bad in ["s3://", "ftp://x", "bucket"] {
            assert!(open(&config(bad)).is_err(), "{bad}");
        }
    }
}
