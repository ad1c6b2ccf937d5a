//! The store conformance suite (`weft_store::testing`) against the file store, the same cases
//! the PostgreSQL store passes.

use weft_store::Store;
use weft_store::file::{FileStore, FileStoreConfig};
use weft_store::testing::{Case, Reopen};

fn with_store(_case_name: &'static str, case: Case) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store");
    let open = |reopen: Reopen| -> Box<dyn Store> {
        if reopen == Reopen::Fresh {
            let _ = std::fs::remove_dir_all(&path);
        }
        Box::new(FileStore::open(FileStoreConfig::new(&path, 256)).expect("open the file store"))
    };
    case(&open);
}

weft_store::store_conformance_tests!(with_store);
