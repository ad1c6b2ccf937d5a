//! Feeds arbitrary bytes to the node-to-node frame reader: the length prefix, the envelope
//! decoder, and the entries a frame may carry.
//!
//! Checks: no panic; a length past the limit is refused before any allocation; a frame that
//! decodes encodes back to a frame that decodes to the same envelope; an entry image that
//! decodes into an entry gives back the same image.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_cluster::wire::{self, EntryImage, Envelope, Request, Response};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(len)) = wire::body_len(data) {
        assert!(len <= wire::FRAME_BYTES_MAX);
    }
    let Ok(envelope) = wire::decode(data) else {
        return;
    };
    let mut again = Vec::new();
    wire::encode(&envelope, &mut again);
    let body = &again[wire::FRAME_HEADER_BYTES..];
    assert_eq!(wire::body_len(&again).ok().flatten(), Some(body.len()));
    assert_eq!(wire::decode(body).ok(), Some(envelope.clone()));
    let images: Vec<&EntryImage> = match &envelope {
        Envelope::Request(_, Request::Replicate { replicas, .. }) => replicas
            .iter()
            .filter_map(|(_, replica)| replica.entry.as_ref())
            .collect(),
        Envelope::Response(_, Response::Entries { entries, .. }) => entries.iter().collect(),
        _ => Vec::new(),
    };
    for image in images {
        if let Ok(entry) = image.to_entry() {
            let back = EntryImage::of(&entry);
            assert_eq!(back.key, image.key);
            assert_eq!(back.version, image.version);
        }
    }
});
