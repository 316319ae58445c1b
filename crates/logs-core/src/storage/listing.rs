//! What a listing of a folder (or a prefix in a bucket) found: the leaf both the catalog and
//! the local folder's listing build on.

use std::sync::Arc;

use object_store::ObjectMeta;

/// The entries of one folder (or prefix), by name.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) folders: Vec<String>,
    pub(crate) objects: Vec<Listed>,
}

/// An object as listed.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    /// The last part of its key or path.
    pub(crate) file_name: String,
    /// As errors name it.
    pub(crate) name: Arc<str>,
    pub(crate) meta: ObjectMeta,
}

impl Listing {
    pub(crate) fn sort(&mut self) {
        self.folders.sort();
        self.objects.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    }
}
