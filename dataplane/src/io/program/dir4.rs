//! The XDP path's IPv4 table: the workers' own structure, DIR-24-8 ([`crate::l3::fib::Fib`]),
//! built in the memory of a map the program reads.
//!
//! A set is one BPF array of 4 KiB pages made mappable (`BPF_F_MMAPABLE`): the flat table's
//! 2^24 entries, room for [`GROUPS`] groups of longer prefixes, the hops the entries name
//! (`struct xfwd_route4`, 16 bytes each), then the members of equal-cost groups (hop indices;
//! the program picks one by the workers' flow hash, `dir4_member`). xfwd maps the set and
//! writes the [`Fib`] there ([`crate::l3::fib::Lent`]); the program reads the same pages
//! (`dir4_lookup` in bpf/xfwd.bpf.c). A lookup is two or three reads whatever the table's size, where the LPM
//! trie it replaces walked up to 32 nodes.
//!
//! The set is filled from the workers' own FIB, not from routes: a whole copy of its entries
//! (13–18 ms whatever the table, where building it from a million routes' list took 120–150
//! ms, the list not counted), then, in kernel mode, the entries under each prefix the tables
//! say changed ([`crate::l3::tables::Changes4`], [`Fib::repaint_from`]). The entries name the workers'
//! next hop indices, and the set's hops are what the program does with each
//! ([`export::nexthops4`]), so the program's table is the workers' at every publication it
//! follows, with nothing to diff.
//!
//! Two sets, left-right (as `routes::incremental` keeps the workers' tables), each in its slot
//! of `xfwd_dir4` from the start: the live one (`XFWD_CONFIG_DIR4` names its slot) is never
//! written; a change is painted into the other, which then becomes the live one by one write
//! of that plain array slot, at once. A program that read the slot before may still run with
//! the set switched from, so that set is written again only after an RCU grace period: xfwd
//! waits for one ([`Dir4::settle`], an update of the set's own map-of-maps slot, from which the
//! kernel returns only once no program runs with what it held, some 10 ms here) after the
//! switch, not before it.

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::maps::{abi, map_err, route_value, XdpError};
use crate::l3::export::{self, FastNext};
use crate::l3::fib::{Fib, Lent, NhIndex, Prefix, FLAT, GROUP_LEN};
use crate::l3::RouterTables;

/// Bytes of one element of a set.
const PAGE: usize = abi::XFWD_DIR_PAGE as usize;
/// Groups of longer-than-/24 prefixes a set has room for: a table whose longer prefixes fall
/// in more /24s than this is the workers' alone.
pub const GROUPS: usize = abi::XFWD_DIR4_GROUPS as usize;
/// Hops a set names at most (index 0 is no route).
const HOPS: usize = abi::XFWD_DIR4_HOPS as usize;
/// Bytes of one hop (`struct xfwd_route4`).
const HOP_LEN: usize = 16;
/// Members of equal-cost groups a set holds (each a hop's index): a group beyond them is the
/// workers'.
const MEMBERS: usize = abi::XFWD_DIR4_MEMBERS as usize;
const FLAT_BYTES: usize = abi::XFWD_DIR4_FLAT_PAGES as usize * PAGE;
const GROUP_BYTES: usize = abi::XFWD_DIR4_GROUP_PAGES as usize * PAGE;
const SET_BYTES: usize = abi::XFWD_DIR4_PAGES as usize * PAGE;

const _: () = {
    assert!(FLAT_BYTES == FLAT * 2);
    assert!(GROUP_BYTES == GROUPS * GROUP_LEN * 2);
    assert!(SET_BYTES == FLAT_BYTES + GROUP_BYTES + HOPS * HOP_LEN + MEMBERS * 2);
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

    /// The members' bytes.
    fn members(&self) -> *mut u8 {
        // SAFETY: within the mapping: the members follow the hops, MEMBERS * 2 bytes to its end.
        unsafe { self.at.as_ptr().add(FLAT_BYTES + GROUP_BYTES + HOPS * HOP_LEN) }
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

/// One set: the map (its fd in its own slot of `xfwd_dir4`) and its memory.
struct Set {
    map: MapHandle,
    mem: Arc<Mapping>,
    /// The table in it, and the id of the tables it holds (`None`: none, or not whole).
    fib: Option<(Fib, u64)>,
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
        Ok(Set { map, mem, fib: None })
    }

    /// Writes the hops, by the index the entries name (at most [`HOPS`]), and the groups'
    /// members (at most [`MEMBERS`]; a group with members beyond is the workers').
    fn write_hops(&mut self, hops: &[FastNext], members: &[NhIndex]) {
        for (i, hop) in hops.iter().enumerate().take(HOPS) {
            let value = hop_value(*hop);
            // SAFETY: hop i < HOPS lies within the hops' bytes; no program reads this set: it
            // is not the live one, and was settled since it last was.
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), self.mem.hops().add(i * HOP_LEN), HOP_LEN) };
        }
        for (i, m) in members.iter().enumerate().take(MEMBERS) {
            // SAFETY: member i < MEMBERS lies within the members' bytes, as above.
            unsafe { std::ptr::copy_nonoverlapping(m.0.to_ne_bytes().as_ptr(), self.mem.members().add(i * 2), 2) };
        }
    }
}

/// What [`Dir4::follow`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// Nothing: the program has these tables already (or refused them before).
    Same,
    /// The workers' FIB copied whole into the spare set, which became the live one.
    Copied,
    /// This many prefixes repainted in the spare set, which became the live one.
    Painted(usize),
}

/// The program's IPv4 table: its slots, the switch between them, the two sets.
pub struct Dir4 {
    outer: MapHandle,
    /// `xfwd_config`, whose `XFWD_CONFIG_DIR4` slot names the live set.
    config: MapHandle,
    /// The sets, made at the first load (while xfwd holds `CAP_BPF`), each in its slot.
    sets: Vec<Set>,
    /// The live set, or the one last live.
    live: usize,
    /// Whether `live` is live (else the program has no IPv4 table: `XFWD_DIR4_NONE`).
    slotted: bool,
    /// The id of tables last refused (too big): not tried again.
    refused: Option<u64>,
    /// A set was switched from and no grace period has passed since (as far as xfwd knows).
    unsettled: bool,
}

impl Dir4 {
    /// The table behind map of maps `outer` (`xfwd_dir4`) and the switch in `config`
    /// (`xfwd_config`), empty: every IPv4 frame the workers'.
    pub fn new(outer: MapHandle, config: MapHandle) -> Dir4 {
        Dir4 { outer, config, sets: Vec::new(), live: 0, slotted: false, refused: None, unsettled: false }
    }

    /// The spare set's index, the sets made if they are not yet.
    fn spare(&mut self) -> Result<usize, XdpError> {
        while self.sets.len() < abi::XFWD_DIR4_SETS as usize {
            let set = Set::create()?;
            let (slot, fd) = (self.sets.len() as u32, set.map.as_fd().as_raw_fd() as u32);
            self.outer.update(&slot.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY).map_err(map_err("xfwd_dir4"))?;
            self.sets.push(set);
        }
        Ok(1 - self.live)
    }

    /// Names `slot` (or `XFWD_DIR4_NONE`) the live one.
    fn switch(&self, slot: u32) -> Result<(), XdpError> {
        self.config
            .update(&abi::XFWD_CONFIG_DIR4.to_ne_bytes(), &slot.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("xfwd_config"))
    }

    /// Waits, if a set was switched from since, until no program runs with it any more (an
    /// RCU grace period: the kernel returns from an update of a map-of-maps slot only then).
    /// [`Dir4::follow`] settles first; the XDP path's thread settles right after each
    /// follow, while no change waits.
    pub fn settle(&mut self) -> Result<(), XdpError> {
        if !self.unsettled {
            return Ok(());
        }
        let spare = 1 - self.live;
        let Some(set) = self.sets.get(spare) else {
            return Ok(());
        };
        let fd = set.map.as_fd().as_raw_fd() as u32;
        self.outer
            .update(&(spare as u32).to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("xfwd_dir4"))?;
        self.unsettled = false;
        Ok(())
    }

    /// Makes the spare set the live one; the one switched from is the spare, once settled.
    fn swap(&mut self, spare: usize) -> Result<(), XdpError> {
        self.switch(spare as u32)?;
        self.live = spare;
        self.slotted = true;
        self.unsettled = true;
        Ok(())
    }

    /// The id of the tables in the live set, if any.
    fn at(&self) -> Option<u64> {
        self.sets.get(self.live).filter(|_| self.slotted).and_then(|s| s.fib.as_ref()).map(|f| f.1)
    }

    /// Leaves the program no IPv4 table (every IPv4 frame goes to the workers), for tables
    /// `id` that it cannot hold, and says why.
    fn refuse(&mut self, id: u64, why: String) -> XdpError {
        let _ = self.switch(abi::XFWD_DIR4_NONE);
        // Either set may still be read: one grace period, and no program runs with them.
        self.unsettled = true;
        let _ = self.settle();
        for s in &mut self.sets {
            s.fib = None;
        }
        self.slotted = false;
        self.refused = Some(id);
        XdpError::Limit(format!(
            "the XDP path's IPv4 table cannot hold these routes ({why}): the workers forward every IPv4 frame"
        ))
    }

    /// Makes the program's table tables `t`'s IPv4 FIB in the spare set: the prefixes changed
    /// since the tables the spare holds repainted, where `t` says which
    /// ([`crate::l3::tables::Changes4`]), else the FIB copied whole into it; then the spare
    /// becomes the live one. Tables the sets have no room for switch the program to none (the
    /// workers forward every IPv4 frame) and say why, once.
    pub fn follow(&mut self, t: &RouterTables) -> Result<Followed, XdpError> {
        if self.at() == Some(t.id) || self.refused == Some(t.id) {
            return Ok(Followed::Same);
        }
        if t.v4.nexthops.len() > HOPS {
            return Err(self.refuse(t.id, format!("more than {} next hops", HOPS - 1)));
        }
        self.settle()?;
        let spare = self.spare()?;
        let held = self.sets[spare].fib.as_ref().map(|f| f.1);
        let followed = match held.and_then(|id| t.changes4.as_ref()?.since(id)) {
            Some(changed) => self.paint(spare, t, changed)?,
            None => self.copy(spare, t)?,
        };
        if !self.slotted && followed == Followed::Copied {
            // The first table (or the first since one was refused): the other set gets it too,
            // so that the first change after it is painted, not copied again.
            self.copy(1 - spare, t)?;
        }
        self.sets[spare].write_hops(&export::nexthops4(t), &t.v4.groups);
        self.swap(spare)?;
        Ok(followed)
    }

    /// Copies `t`'s FIB whole into set `spare`.
    fn copy(&mut self, spare: usize, t: &RouterTables) -> Result<Followed, XdpError> {
        // Checked before the 32 MiB are copied: a table with too many groups is refused at once.
        if t.v4.fib.groups_used() > GROUPS {
            return Err(self.refuse(t.id, format!("longer-than-/24 prefixes in more than {GROUPS} /24s")));
        }
        let set = &mut self.sets[spare];
        set.fib = None;
        match t.v4.fib.copy_lent(Box::new(Lend(Arc::clone(&set.mem)))) {
            Ok(fib) => set.fib = Some((fib, t.id)),
            Err(e) => return Err(self.refuse(t.id, e.to_string())),
        }
        Ok(Followed::Copied)
    }

    /// Repaints `changed` from `t`'s FIB into set `spare` (which holds tables `changed` were
    /// made to).
    fn paint(&mut self, spare: usize, t: &RouterTables, mut changed: Vec<Prefix>) -> Result<Followed, XdpError> {
        changed.sort_unstable();
        changed.dedup();
        let Some((fib, at)) = self.sets[spare].fib.as_mut() else {
            return Err(XdpError::Missing("xfwd_dir4_set"));
        };
        if let Err(e) = changed.iter().try_for_each(|p| fib.repaint_from(*p, &t.v4.fib)) {
            return Err(self.refuse(t.id, e.to_string()));
        }
        *at = t.id;
        Ok(Followed::Painted(changed.len()))
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

/// `struct xfwd_route4` for `next`: a hop as [`route_value`] writes it; a group
/// (`XFWD_HOP_GROUP`) with its first member where a gateway goes and their number where the
/// MTU goes, or, with members beyond the set's, the workers'.
fn hop_value(next: FastNext) -> [u8; HOP_LEN] {
    let mut value = [0u8; HOP_LEN];
    match next {
        FastNext::Hop(h) => value.copy_from_slice(&route_value(Some(h))),
        FastNext::Group { first, len } if first as usize + usize::from(len) <= MEMBERS => {
            value[4..8].copy_from_slice(&u32::from(len).to_ne_bytes());
            value[8..12].copy_from_slice(&first.to_ne_bytes());
            value[12..].copy_from_slice(&abi::XFWD_HOP_GROUP.to_ne_bytes());
        }
        FastNext::Group { .. } | FastNext::Workers => {}
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_picks_a_groups_member_with_the_workers_seed() {
        assert_eq!(u64::from(abi::XFWD_ECMP_SEED), crate::l3::family::ECMP_SEED);
    }

    #[test]
    fn a_group_names_its_members_unless_they_lie_beyond_the_sets() {
        let v = hop_value(FastNext::Group { first: 7, len: 3 });
        assert_eq!(u32::from_ne_bytes(v[4..8].try_into().unwrap()), 3);
        assert_eq!(u32::from_ne_bytes(v[8..12].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(v[12..].try_into().unwrap()), abi::XFWD_HOP_GROUP);
        let beyond = hop_value(FastNext::Group { first: MEMBERS as u32 - 2, len: 3 });
        assert_eq!(beyond, [0; HOP_LEN], "the workers'");
        assert_eq!(hop_value(FastNext::Workers), [0; HOP_LEN]);
    }
}
