//! The XDP path's IPv4 table: the workers' own structure, DIR-24-8 ([`crate::l3::fib::Fib`]),
//! built in the memory of a map the program reads.
//!
//! A set is one BPF array of 4 KiB pages made mappable (`BPF_F_MMAPABLE`): the flat table's
//! 2^24 entries, room for [`GROUPS`] groups of longer prefixes, then the hops the entries
//! name (`struct xfwd_route4`, 16 bytes each). xfwd maps the set and builds the [`Fib`] in
//! place ([`crate::l3::fib::Lent`]); the program reads the same pages (`dir4_lookup` in
//! bpf/xfwd.bpf.c). A lookup is two or three reads whatever the table's size, where the LPM
//! trie it replaces walked up to 32 nodes.
//!
//! Two sets, left-right (as `routes::incremental` keeps the workers' tables): the one in the
//! program's slot is never written; a change is painted into the other, which then takes the
//! slot in one write (the kernel returns from it once no program still runs with the set it
//! replaced), and the replaced set is brought up to date at the next change. A new table
//! (a reload) is built whole in the spare. Hops are interned: an index names one hop for as
//! long as the table lives, in both sets, and the interner starts again with each whole build.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::maps::{abi, map_err, route_value, XdpError};
use crate::l3::export::{self, FastHop, FastRoutes};
use crate::l3::fib::{Fib, Lent, NhIndex, Prefix, FLAT, GROUP_LEN};

/// Bytes of one element of a set.
const PAGE: usize = abi::XFWD_DIR_PAGE as usize;
/// Groups of longer-than-/24 prefixes a set has room for: a table whose longer prefixes fall
/// in more /24s than this is the workers' alone.
pub const GROUPS: usize = abi::XFWD_DIR4_GROUPS as usize;
/// Hops a set names at most (index 0 is no route).
const HOPS: usize = abi::XFWD_DIR4_HOPS as usize;
/// Bytes of one hop (`struct xfwd_route4`).
const HOP_LEN: usize = 16;
const FLAT_BYTES: usize = abi::XFWD_DIR4_FLAT_PAGES as usize * PAGE;
const GROUP_BYTES: usize = abi::XFWD_DIR4_GROUP_PAGES as usize * PAGE;
const SET_BYTES: usize = abi::XFWD_DIR4_PAGES as usize * PAGE;

const _: () = {
    assert!(FLAT_BYTES == FLAT * 2);
    assert!(GROUP_BYTES == GROUPS * GROUP_LEN * 2);
    assert!(SET_BYTES == FLAT_BYTES + GROUP_BYTES + HOPS * HOP_LEN);
    // Hop indices are the FIB's 15-bit next hops.
    assert!(HOPS <= 1 << 15);
};

/// A set mapped into xfwd; unmapped when the last holder (the set, the table built in it)
/// goes.
struct Mapping {
    at: NonNull<u8>,
}

// SAFETY: the mapping is plain shared memory owned by this value; who writes through it is
// ordered by the holders (`&mut` to the table in it, the left-right discipline above).
unsafe impl Send for Mapping {}
// SAFETY: as for Send.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(map: &MapHandle) -> Result<Mapping, XdpError> {
        // SAFETY: maps SET_BYTES of the set's own fd, a BPF_F_MMAPABLE array of exactly that
        // size, shared and writable; the result is checked before use.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SET_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            let cause = std::io::Error::last_os_error().to_string();
            return Err(XdpError::Map { map: "xfwd_dir4_set", cause: format!("mapping it: {cause}") });
        }
        NonNull::new(at.cast()).map(|at| Mapping { at }).ok_or(XdpError::Missing("xfwd_dir4_set"))
    }

    /// The hops' bytes.
    fn hops(&self) -> *mut u8 {
        // SAFETY: within the mapping: the hops follow the flat table and the groups.
        unsafe { self.at.as_ptr().add(FLAT_BYTES + GROUP_BYTES) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing refers to it any more (the last
        // holder is going).
        unsafe { libc::munmap(self.at.as_ptr().cast(), SET_BYTES) };
    }
}

/// A set's flat table and groups, lent to the table built in it.
struct Lend(Arc<Mapping>);

impl Lent for Lend {
    fn tables(&mut self) -> (&mut [u16], &mut [u16]) {
        let at = self.0.at.as_ptr().cast::<u16>();
        // SAFETY: the flat table and the groups are the mapping's first FLAT_BYTES and the
        // GROUP_BYTES after them: disjoint, u16-aligned (page-aligned), alive while the Arc
        // is; only the table they are lent to writes them.
        unsafe {
            (std::slice::from_raw_parts_mut(at, FLAT), std::slice::from_raw_parts_mut(at.add(FLAT), GROUPS * GROUP_LEN))
        }
    }
}

/// One set: the map (its fd goes into the program's slot) and its memory.
struct Set {
    map: MapHandle,
    mem: Arc<Mapping>,
    /// The table built in it (`None`: not built since the last whole build elsewhere).
    fib: Option<Fib>,
    /// Hops written into it (a prefix of the interner's).
    hops: usize,
}

impl Set {
    /// A new set (takes `CAP_BPF`), mapped.
    fn create() -> Result<Set, XdpError> {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_MMAPABLE,
            ..Default::default()
        };
        let map = MapHandle::create(
            libbpf_rs::MapType::Array,
            Some("xfwd_dir4_set"),
            4,
            PAGE as u32,
            abi::XFWD_DIR4_PAGES,
            &opts,
        )
        .map_err(map_err("xfwd_dir4_set"))?;
        let mem = Arc::new(Mapping::new(&map)?);
        Ok(Set { map, mem, fib: None, hops: 0 })
    }

    /// Writes the hops the set lacks.
    fn write_hops(&mut self, hops: &[Option<FastHop>]) {
        for (i, hop) in hops.iter().enumerate().skip(self.hops) {
            let value = route_value(*hop);
            debug_assert_eq!(value.len(), HOP_LEN);
            // SAFETY: hop i < HOPS (the interner's bound) lies within the hops' bytes; no
            // program reads this set while it is not in the slot.
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), self.mem.hops().add(i * HOP_LEN), HOP_LEN) };
        }
        self.hops = hops.len();
    }
}

/// The hops by index (0: none), and each one's index.
#[derive(Default)]
struct Hops {
    list: Vec<Option<FastHop>>,
    index: HashMap<Option<FastHop>, u16>,
}

impl Hops {
    /// `hop`'s index, interned now if new; `None` when every index is taken.
    fn intern(&mut self, hop: Option<FastHop>) -> Option<u16> {
        if self.list.is_empty() {
            self.list.push(None);
        }
        if let Some(&i) = self.index.get(&hop) {
            return Some(i);
        }
        if self.list.len() >= HOPS {
            return None;
        }
        let i = self.list.len() as u16;
        self.list.push(hop);
        self.index.insert(hop, i);
        Some(i)
    }

    /// Every hop of `routes` interned; false when they outgrow the indices.
    fn intern_all(&mut self, routes: &FastRoutes) -> bool {
        routes.values().all(|h| self.intern(*h).is_some())
    }

    fn of(&self, hop: &Option<FastHop>) -> NhIndex {
        NhIndex(self.index.get(hop).copied().unwrap_or(0))
    }
}

/// The program's IPv4 table: its slot, the two sets, the hops they name.
pub struct Dir4 {
    outer: MapHandle,
    /// The sets, made at the first load (while xfwd holds `CAP_BPF`); `live` is in the slot.
    sets: Vec<Set>,
    live: usize,
    hops: Hops,
    /// Prefixes changed in the live set that the spare has not seen.
    lag: Vec<Prefix>,
}

impl Dir4 {
    /// The table behind slot map `outer` (`xfwd_dir4`), empty: every IPv4 frame the workers'.
    pub fn new(outer: MapHandle) -> Dir4 {
        Dir4 { outer, sets: Vec::new(), live: 0, hops: Hops::default(), lag: Vec::new() }
    }

    /// The spare set's index, the sets made if they are not yet.
    fn spare(&mut self) -> Result<usize, XdpError> {
        while self.sets.len() < 2 {
            self.sets.push(Set::create()?);
        }
        Ok(1 - self.live)
    }

    /// Puts the spare set in the program's slot; the replaced one is the spare.
    fn swap(&mut self, spare: usize) -> Result<(), XdpError> {
        let fd = self.sets[spare].map.as_fd().as_raw_fd() as u32;
        self.outer.update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY).map_err(map_err("xfwd_dir4"))?;
        self.live = spare;
        Ok(())
    }

    /// Empties the program's slot: every IPv4 frame goes to the workers.
    fn clear(&mut self) {
        let _ = self.outer.delete(&0u32.to_ne_bytes());
        for s in &mut self.sets {
            s.fib = None;
        }
    }

    /// Builds `routes` whole in the spare set and puts it in the slot. A table the set has no
    /// room for empties the slot (the workers forward every IPv4 frame) and says why.
    pub fn load(&mut self, routes: &FastRoutes) -> Result<(), XdpError> {
        let spare = self.spare()?;
        self.hops = Hops::default();
        if !self.hops.intern_all(routes) {
            self.clear();
            return Err(too_big(format!("more than {} distinct next hops", HOPS - 1)));
        }
        let list: Vec<(Prefix, NhIndex)> = routes.iter().map(|(p, h)| (*p, self.hops.of(h))).collect();
        let set = &mut self.sets[spare];
        set.fib = None;
        match Fib::build_lent(&list, Box::new(Lend(Arc::clone(&set.mem)))) {
            Ok(fib) => set.fib = Some(fib),
            Err(e) => {
                self.clear();
                return Err(too_big(e.to_string()));
            }
        }
        set.hops = 0;
        set.write_hops(&self.hops.list);
        self.swap(spare)?;
        // The other set holds an older table: built whole again at the next change.
        self.sets[1 - spare].fib = None;
        self.lag.clear();
        Ok(())
    }

    /// Turns the table `old` (the one in the slot) into `new`: the changed prefixes painted
    /// into the spare (with those it missed), which then takes the slot. Returns the prefixes
    /// changed.
    pub fn update(&mut self, old: &FastRoutes, new: &FastRoutes) -> Result<usize, XdpError> {
        let (set, gone) = export::diff(old, new);
        let changed: Vec<Prefix> = set.iter().map(|(p, _)| *p).chain(gone).collect();
        if changed.is_empty() {
            return Ok(0);
        }
        let spare = self.spare()?;
        if self.sets[spare].fib.is_none() || !self.hops.intern_all(new) {
            self.load(new)?;
            return Ok(changed.len());
        }
        let hops = &self.hops;
        let nh = |h: &Option<FastHop>| hops.of(h);
        let s = &mut self.sets[spare];
        let fib = s.fib.as_mut().ok_or(XdpError::Missing("xfwd_dir4_set"))?;
        let painted = self.lag.iter().chain(&changed).try_for_each(|p| fib.repaint(*p, new, nh));
        if let Err(e) = painted {
            self.clear();
            return Err(too_big(e.to_string()));
        }
        let s = &mut self.sets[spare];
        s.write_hops(&self.hops.list);
        self.swap(spare)?;
        self.lag = changed;
        Ok(self.lag.len())
    }

    /// What the kernel charges for the sets (their `memlock` in fdinfo), if it says.
    pub fn memory(&self) -> Option<u64> {
        let charged = |m: &MapHandle| -> Option<u64> {
            let fd = m.as_fd().as_raw_fd();
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
            info.lines().find_map(|l| l.strip_prefix("memlock:")).and_then(|v| v.trim().parse().ok())
        };
        self.sets.iter().map(|s| charged(&s.map)).sum()
    }
}

/// Why the program holds no IPv4 table, and what the workers do meanwhile.
fn too_big(why: String) -> XdpError {
    XdpError::Limit(format!(
        "the XDP path's IPv4 table cannot hold these routes ({why}): the workers forward every IPv4 frame"
    ))
}
