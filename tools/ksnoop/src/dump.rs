// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Typed data as text, by libbpf's btf_dump (`btf_dump__dump_type_data`): the printer ksnoop's output is made of.
//! libbpf hands each piece of text to a printf-like callback; this one formats it with the C library's
//! `vsnprintf` into a string.

use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr::NonNull;

use anyhow::{bail, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::AsRawLibbpf;

extern "C" {
    fn vsnprintf(buf: *mut c_char, size: usize, fmt: *const c_char, args: *mut libbpf_sys::__va_list_tag) -> c_int;
}

/// What the callback writes into: the text so far.
struct Sink {
    text: String,
}

unsafe extern "C" fn print(ctx: *mut c_void, fmt: *const c_char, args: *mut libbpf_sys::__va_list_tag) {
    // SAFETY: ctx is the Sink that `Dumper::dump` lent for this call; fmt and args come from libbpf.
    let sink = unsafe { &mut *(ctx as *mut Sink) };
    let mut buf = [0u8; 4096];
    let n = unsafe { vsnprintf(buf.as_mut_ptr() as *mut c_char, buf.len(), fmt, args) };
    if n > 0 {
        let n = (n as usize).min(buf.len() - 1);
        sink.text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// A btf_dump over the kernel's BTF.
pub struct Dumper {
    dump: NonNull<libbpf_sys::btf_dump>,
    sink: Box<Sink>,
    indent: CString,
}

/// What a dump gave: the text, and whether the data was shorter than the type (cut).
pub struct Dumped {
    pub text: String,
    pub cut: bool,
}

impl Dumper {
    pub fn new(btf: &libbpf_rs::btf::Btf<'_>) -> Result<Dumper> {
        let mut sink = Box::new(Sink { text: String::new() });
        let ctx = &mut *sink as *mut Sink as *mut c_void;
        // SAFETY: the BTF outlives the dumper (both live for the run); the callback's context is the boxed sink,
        // which this struct keeps.
        let dump =
            unsafe { libbpf_sys::btf_dump__new(btf.as_libbpf_object().as_ptr(), Some(print), ctx, std::ptr::null()) };
        let Some(dump) = NonNull::new(dump) else { bail!("libbpf could not make a btf_dump") };
        Ok(Dumper { dump, sink, indent: CString::new(" ").unwrap() })
    }

    /// `data` as type `type_id`, indented by `indent` spaces; `compact`: on one line.
    pub fn dump(&mut self, type_id: u32, data: &[u8], indent: i32, compact: bool) -> Dumped {
        self.sink.text.clear();
        let opts = libbpf_sys::btf_dump_type_data_opts {
            sz: std::mem::size_of::<libbpf_sys::btf_dump_type_data_opts>() as libbpf_sys::size_t,
            indent_str: self.indent.as_ptr(),
            indent_level: indent,
            compact,
            ..Default::default()
        };
        // SAFETY: data is valid for its length, which libbpf is told; the dump object is live.
        let ret = unsafe {
            libbpf_sys::btf_dump__dump_type_data(
                self.dump.as_ptr(),
                type_id,
                data.as_ptr() as *const c_void,
                data.len() as libbpf_sys::size_t,
                &opts,
            )
        };
        Dumped { text: std::mem::take(&mut self.sink.text), cut: ret == -libc::E2BIG }
    }
}

impl Drop for Dumper {
    fn drop(&mut self) {
        // SAFETY: made by btf_dump__new, freed once.
        unsafe { libbpf_sys::btf_dump__free(self.dump.as_ptr()) }
    }
}
