//! The export: its handler ([`handler`]), the pipeline that runs it for the handler and for
//! prepared exports ([`pipeline`]), the queue and spill between the pipeline and the response
//! body ([`chunks`]), and the headers every export answer has ([`headers`]).

pub(crate) mod chunks;
pub(crate) mod handler;
pub(crate) mod headers;
pub(crate) mod pipeline;
