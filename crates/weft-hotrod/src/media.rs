//! Media types as Hot Rod carries them (since protocol 2.8): none, a predefined id, or a
//! custom name, each with optional parameters.

use bytes::{BufMut, BytesMut};

use crate::wire::{ReadError, ReadResult, Reader, put_string, put_vint};

/// The predefined media types, by wire id (Infinispan's `MediaTypeIds`).
const PREDEFINED: [&str; 17] = [
    "application/x-java-object",
    "application/json",
    "application/octet-stream",
    "application/pdf",
    "application/rtf",
    "application/zip",
    "image/gif",
    "image/jpeg",
    "image/png",
    "text/css",
    "text/csv",
    "application/x-protostream",
    "text/plain",
    "text/html",
    "application/x-jboss-marshalling",
    "application/x-infinispan-marshalling",
    "application/unknown",
];

/// Most parameters accepted on one media type.
const PARAMS_MAX: usize = 16;

/// A media type on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MediaType {
    /// None given (the operation carries no data, or the client leaves it to the server).
    #[default]
    Unspecified,
    /// A predefined type by id (see Infinispan's `MediaTypeIds`), with parameters.
    Predefined {
        /// The id (12 = `application/x-protostream`, 13 = `text/plain`, ...).
        id: u32,
        /// `name=value` parameters (e.g. `charset=UTF-8`).
        params: Vec<(String, String)>,
    },
    /// A type by name, with parameters.
    Custom {
        /// `type/subtype`.
        name: String,
        /// `name=value` parameters.
        params: Vec<(String, String)>,
    },
}

impl MediaType {
    /// The predefined or custom type for `essence` (`type/subtype`), without parameters.
    #[must_use]
    pub fn from_essence(essence: &str) -> Self {
        match PREDEFINED
            .iter()
            .position(|p| p.eq_ignore_ascii_case(essence))
        {
            Some(index) => Self::Predefined {
                id: index as u32 + 1,
                params: Vec::new(),
            },
            None => Self::Custom {
                name: essence.to_owned(),
                params: Vec::new(),
            },
        }
    }

    /// `type/subtype`, or `None` when unspecified or an unknown id.
    #[must_use]
    pub fn essence(&self) -> Option<&str> {
        match self {
            Self::Unspecified => None,
            Self::Predefined { id, .. } => (*id as usize)
                .checked_sub(1)
                .and_then(|i| PREDEFINED.get(i))
                .copied(),
            Self::Custom { name, .. } => Some(name),
        }
    }

    /// The parameters.
    #[must_use]
    pub fn params(&self) -> &[(String, String)] {
        match self {
            Self::Unspecified => &[],
            Self::Predefined { params, .. } | Self::Custom { params, .. } => params,
        }
    }

    /// The value of parameter `name` (case-insensitive).
    #[must_use]
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params()
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn read(reader: &mut Reader<'_>) -> ReadResult<Self> {
        match reader.u8()? {
            0 => Ok(Self::Unspecified),
            1 => {
                let id = reader.vint()?;
                let params = read_params(reader)?;
                Ok(Self::Predefined { id, params })
            }
            2 => {
                let name = reader.string()?;
                let params = read_params(reader)?;
                Ok(Self::Custom { name, params })
            }
            other => Err(ReadError::Invalid(format!(
                "unknown media type kind {other}"
            ))),
        }
    }

    /// Appends the wire form.
    pub fn write(&self, out: &mut BytesMut) {
        let params = match self {
            Self::Unspecified => {
                out.put_u8(0);
                return;
            }
            Self::Predefined { id, params } => {
                out.put_u8(1);
                put_vint(out, *id);
                params
            }
            Self::Custom { name, params } => {
                out.put_u8(2);
                put_string(out, name);
                params
            }
        };
        put_vint(out, params.len() as u32);
        for (name, value) in params {
            put_string(out, name);
            put_string(out, value);
        }
    }
}

fn read_params(reader: &mut Reader<'_>) -> ReadResult<Vec<(String, String)>> {
    let n = reader.count(PARAMS_MAX, "media type parameter")?;
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        let name = reader.string()?;
        let value = reader.string()?;
        params.push((name, value));
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the traced forms: `01 0c 00` is protostream; text/plain with a charset.
    #[test]
    fn traced_media_types() {
        let mut r = Reader::new(&[0x01, 0x0c, 0x00], 100, 100);
        let protostream = MediaType::read(&mut r).expect("parses");
        assert_eq!(protostream.essence(), Some("application/x-protostream"));
        let mut bytes = vec![0x01, 0x0d, 0x01, 0x07];
        bytes.extend_from_slice(b"charset");
        bytes.push(0x05);
        bytes.extend_from_slice(b"UTF-8");
        let mut r = Reader::new(&bytes, 100, 100);
        let text = MediaType::read(&mut r).expect("parses");
        assert_eq!(text.essence(), Some("text/plain"));
        assert_eq!(text.param("CHARSET"), Some("UTF-8"));
        let mut out = BytesMut::new();
        text.write(&mut out);
        assert_eq!(&out[..], &bytes[..]);
        assert_eq!(
            MediaType::from_essence("application/x-protostream"),
            protostream
        );
        assert_eq!(
            MediaType::from_essence("application/x-thing").essence(),
            Some("application/x-thing")
        );
        assert_eq!(
            MediaType::Predefined {
                id: 99,
                params: vec![]
            }
            .essence(),
            None
        );
    }
}
