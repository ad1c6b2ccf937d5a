//! The bytes a TLS client sends first, as the server reads them before choosing its TLS
//! configuration: the first byte decides TLS (`0x16`), rustls' `Acceptor` parses the
//! ClientHello, and the server looks at its ALPN offer (`weft_server::tls::Tls::accept`).
//!
//! Checks: no panic and no hang on any input, cut anywhere.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.first() != Some(&0x16) {
        return;
    }
    let mut acceptor = rustls::server::Acceptor::default();
    let mut input = data;
    loop {
        match acceptor.read_tls(&mut input) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        match acceptor.accept() {
            Ok(None) => {}
            Ok(Some(accepted)) => {
                let hello = accepted.client_hello();
                let _ = hello.server_name();
                let _ = hello
                    .alpn()
                    .is_some_and(|mut offered| offered.any(|name| name == b"http/1.1"));
                return;
            }
            Err(_) => return,
        }
    }
});
