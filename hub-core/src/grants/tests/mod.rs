//! Tests of the grants model: the file ([`file`]), and decisions and filters ([`decide`]).

mod decide;
mod file;
