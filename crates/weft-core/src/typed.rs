//! A typed view of a cache for Rust users: keys and values encoded by a [`Codec`].

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Cache, WriteOptions};
use crate::entry::{CacheEntry, EntryMetadata};
use crate::error::CacheError;

/// Why a value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The bytes are not valid UTF-8.
    #[error("stored bytes are not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
    /// JSON (de)serialization failed.
    #[error("JSON codec: {0}")]
    Json(#[from] serde_json::Error),
}

/// Errors of typed operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TypedError {
    /// The cache refused the operation.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// A key or value did not encode or decode.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// Converts a Rust value to and from the bytes a cache stores.
pub trait Codec: Sized {
    /// The bytes of `self`.
    ///
    /// # Errors
    /// If the value cannot be encoded.
    fn encode(&self) -> Result<Vec<u8>, CodecError>;

    /// The value of `bytes`.
    ///
    /// # Errors
    /// If the bytes are not a valid encoding.
    fn decode(bytes: &[u8]) -> Result<Self, CodecError>;
}

impl Codec for String {
    fn encode(&self) -> Result<Vec<u8>, CodecError> {
        Ok(self.as_bytes().to_vec())
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        Ok(String::from_utf8(bytes.to_vec())?)
    }
}

impl Codec for Vec<u8> {
    fn encode(&self) -> Result<Vec<u8>, CodecError> {
        Ok(self.clone())
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        Ok(bytes.to_vec())
    }
}

impl Codec for Bytes {
    fn encode(&self) -> Result<Vec<u8>, CodecError> {
        Ok(self.to_vec())
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        Ok(Bytes::copy_from_slice(bytes))
    }
}

/// Any serde type, stored as JSON (readable through REST and RESP too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize + DeserializeOwned> Codec for Json<T> {
    fn encode(&self) -> Result<Vec<u8>, CodecError> {
        Ok(serde_json::to_vec(&self.0)?)
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        Ok(Json(serde_json::from_slice(bytes)?))
    }
}

/// What a typed view needs of the cache underneath: the byte-level operations, each run
/// where the cache runs them. A local [`Cache`] is one; a grid member's clustered cache, seen
/// through `weft_grid::BlockingGridCache`, is another (each operation at its key's owner),
/// so a [`TypedCache`] works on either unchanged.
pub trait KeyValue: Clone {
    /// The cache's name.
    fn name(&self) -> &str;

    /// The entry of `key`.
    ///
    /// # Errors
    /// What the cache refused.
    fn get_entry(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError>;

    /// Stores `value` at `key`; the previous entry.
    ///
    /// # Errors
    /// What the cache refused.
    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError>;

    /// Stores `value` unless `key` holds one; the entry found.
    ///
    /// # Errors
    /// What the cache refused.
    fn put_if_absent(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError>;

    /// Stores `value` only if `key` holds one; the entry replaced.
    ///
    /// # Errors
    /// What the cache refused.
    fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError>;

    /// Removes `key`; the entry removed.
    ///
    /// # Errors
    /// What the cache refused.
    fn remove(&self, key: &[u8], options: &WriteOptions) -> Result<Option<CacheEntry>, CacheError>;

    /// How many entries the cache holds.
    ///
    /// # Errors
    /// What the cache refused (a clustered cache: a member that did not answer).
    fn count(&self) -> Result<usize, CacheError>;

    /// Every live entry.
    ///
    /// # Errors
    /// What the cache refused.
    fn entries(&self) -> Result<Vec<CacheEntry>, CacheError>;
}

impl KeyValue for Cache {
    fn name(&self) -> &str {
        Cache::name(self)
    }

    fn get_entry(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        Cache::get_entry(self, key)
    }

    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        Cache::put(self, key, value, options)
    }

    fn put_if_absent(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        Cache::put_if_absent(self, key, value, options)
    }

    fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        Cache::replace(self, key, value, options)
    }

    fn remove(&self, key: &[u8], options: &WriteOptions) -> Result<Option<CacheEntry>, CacheError> {
        Cache::remove(self, key, options)
    }

    fn count(&self) -> Result<usize, CacheError> {
        Ok(Cache::size(self))
    }

    fn entries(&self) -> Result<Vec<CacheEntry>, CacheError> {
        Ok(self.iter().collect())
    }
}

/// A cache seen through codecs for its keys and values: a local [`Cache`] by default, or any
/// [`KeyValue`] (a clustered cache).
pub struct TypedCache<K, V, C = Cache> {
    cache: C,
    types: PhantomData<fn(K, V)>,
}

impl<K, V, C: Clone> Clone for TypedCache<K, V, C> {
    fn clone(&self) -> Self {
        Self {
            cache: self.cache.clone(),
            types: PhantomData,
        }
    }
}

impl<K, V, C: KeyValue> fmt::Debug for TypedCache<K, V, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedCache")
            .field("cache", &self.cache.name())
            .finish()
    }
}

impl<K: Codec, V: Codec, C: KeyValue> TypedCache<K, V, C> {
    /// A typed view of `cache`.
    #[must_use]
    pub fn new(cache: C) -> Self {
        Self {
            cache,
            types: PhantomData,
        }
    }

    /// The byte-level cache underneath.
    #[must_use]
    pub fn raw(&self) -> &C {
        &self.cache
    }

    fn decode_value(entry: Option<crate::CacheEntry>) -> Result<Option<V>, TypedError> {
        entry
            .map(|entry| V::decode(entry.value()))
            .transpose()
            .map_err(TypedError::from)
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn get(&self, key: &K) -> Result<Option<V>, TypedError> {
        Self::decode_value(self.cache.get_entry(&key.encode()?)?)
    }

    /// The value of `key` and its metadata.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn get_with_metadata(&self, key: &K) -> Result<Option<(V, EntryMetadata)>, TypedError> {
        match self.cache.get_entry(&key.encode()?)? {
            Some(entry) => Ok(Some((V::decode(entry.value())?, entry.metadata()))),
            None => Ok(None),
        }
    }

    /// Stores `value`; returns the previous value.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn put(&self, key: &K, value: &V) -> Result<Option<V>, TypedError> {
        self.put_with(key, value, &WriteOptions::default())
    }

    /// Stores `value` with options; returns the previous value.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn put_with(
        &self,
        key: &K,
        value: &V,
        options: &WriteOptions,
    ) -> Result<Option<V>, TypedError> {
        Self::decode_value(self.cache.put(&key.encode()?, &value.encode()?, options)?)
    }

    /// Stores `value` if `key` is absent; returns the existing value otherwise.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn put_if_absent(&self, key: &K, value: &V) -> Result<Option<V>, TypedError> {
        let existing =
            self.cache
                .put_if_absent(&key.encode()?, &value.encode()?, &WriteOptions::default())?;
        Self::decode_value(existing)
    }

    /// Replaces `key`'s value if present; returns the replaced value.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn replace(&self, key: &K, value: &V) -> Result<Option<V>, TypedError> {
        let previous =
            self.cache
                .replace(&key.encode()?, &value.encode()?, &WriteOptions::default())?;
        Self::decode_value(previous)
    }

    /// Removes `key`; returns its value.
    ///
    /// # Errors
    /// If the cache refuses or a codec fails.
    pub fn remove(&self, key: &K) -> Result<Option<V>, TypedError> {
        Self::decode_value(
            self.cache
                .remove(&key.encode()?, &WriteOptions::default())?,
        )
    }

    /// Whether `key` is present.
    ///
    /// # Errors
    /// If the cache refuses or the key fails to encode.
    pub fn contains(&self, key: &K) -> Result<bool, TypedError> {
        Ok(self.cache.get_entry(&key.encode()?)?.is_some())
    }

    /// Entries held.
    ///
    /// # Errors
    /// If the cache refuses (a clustered cache: a member did not answer).
    pub fn size(&self) -> Result<usize, TypedError> {
        Ok(self.cache.count()?)
    }

    /// Every live entry, decoded.
    ///
    /// # Errors
    /// If the cache refuses, or a stored key or value does not decode.
    pub fn entries(&self) -> Result<Vec<(K, V)>, TypedError> {
        self.cache
            .entries()?
            .iter()
            .map(|entry| Ok((K::decode(entry.key())?, V::decode(entry.value())?)))
            .collect()
    }
}
