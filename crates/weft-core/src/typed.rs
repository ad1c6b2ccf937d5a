//! A typed view of a cache for Rust users: keys and values encoded by a [`Codec`].

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Cache, WriteOptions};
use crate::entry::EntryMetadata;
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

/// A cache seen through codecs for its keys and values.
pub struct TypedCache<K, V> {
    cache: Cache,
    types: PhantomData<fn(K, V)>,
}

impl<K, V> Clone for TypedCache<K, V> {
    fn clone(&self) -> Self {
        Self {
            cache: self.cache.clone(),
            types: PhantomData,
        }
    }
}

impl<K, V> fmt::Debug for TypedCache<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedCache")
            .field("cache", &self.cache.name())
            .finish()
    }
}

impl<K: Codec, V: Codec> TypedCache<K, V> {
    /// A typed view of `cache`.
    #[must_use]
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
            types: PhantomData,
        }
    }

    /// The byte-level cache underneath.
    #[must_use]
    pub fn raw(&self) -> &Cache {
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
        Ok(self.cache.contains(&key.encode()?)?)
    }

    /// Entries held.
    #[must_use]
    pub fn size(&self) -> usize {
        self.cache.size()
    }

    /// Every live entry, decoded.
    ///
    /// # Errors
    /// If a stored key or value does not decode.
    pub fn entries(&self) -> Result<Vec<(K, V)>, TypedError> {
        self.cache
            .iter()
            .map(|entry| Ok((K::decode(entry.key())?, V::decode(entry.value())?)))
            .collect()
    }
}
