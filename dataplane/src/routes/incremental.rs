//! Tables that follow route changes one prefix at a time (kernel mode), published whole.
//!
//! Rebuilding every table for every batch of kernel changes costs what a full build costs
//! (tens of milliseconds for a handful of routes, most of a second for a million): too slow
//! for changes to reach the workers within milliseconds. Changing the tables the workers read
//! in place would need atomics and a grace period in the lookup path. Instead the writer keeps
//! **two** sets of tables (left-right): the *live* one, published and read by the workers, and
//! the *spare*, the one published before it. A batch of changes is applied to the spare, by
//! repainting the IPv4 FIB under each changed prefix ([`Fib::repaint`]) — after first
//! replaying the changes the spare missed while it was live's predecessor — and the spare is
//! then published whole; the old live one becomes the spare. The spare is written only when
//! the writer holds its last reference (every worker has moved on to the newer tables, which
//! each does from its next frame); if a reader still holds it, the live tables are copied
//! instead (counted in [`Incremental::copies`]). Either way a worker sees the tables before a
//! batch or after it, never between.
//!
//! Next hops and equal-cost groups are interned in one append-only list shared by both sets,
//! so an index means the same next hop in either; when it would outgrow the FIB's 15-bit
//! indices, the caller rebuilds from scratch. The IPv6 half is rebuilt whole when an IPv6
//! route changes (its trie has no repaint) and shared by both sets otherwise. The display list
//! (`show routes`) is rebuilt on request ([`Incremental::refresh_display`]): for a million
//! routes that is itself tens of milliseconds, so the caller decides how often.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::l3::fib::{Advice, Fib, NhIndex, Prefix};
use crate::l3::tables::{
    next_id, Changes4, Interner4, Mirrored4, Mirrored6, PortSpec, RouteOrigin, RouterTables, Tables4, Tables6,
    TablesError,
};

/// What `show routes` lists: every IPv4 route with its next hop and origin.
type DisplayList = Vec<(Prefix, NhIndex, RouteOrigin)>;

/// The left-right writer (see the module documentation).
#[derive(Debug)]
pub struct Incremental {
    ports: Vec<PortSpec>,
    interner: Interner4,
    routes: BTreeMap<Prefix, (NhIndex, RouteOrigin)>,
    live: Arc<RouterTables>,
    spare: Option<Arc<RouterTables>>,
    /// Prefixes the spare has not seen (the batch that made the live tables).
    lag: Vec<Prefix>,
    /// Prefixes changed since the last publication.
    pending: Vec<Prefix>,
    v6: Tables6,
    display: Arc<DisplayList>,
    icmp: (u32, u32),
    rfc1812_martians: bool,
    /// Tables still held by a reader when they were to be written: dropped here once free,
    /// so that no worker pays for freeing them.
    retired: Vec<Arc<RouterTables>>,
    /// Publications that had to copy the live tables (the spare was still read).
    pub copies: u64,
    advise: Advice,
    /// A display list being built a slice at a time, and the last prefix it holds.
    building: Option<(DisplayList, Option<Prefix>)>,
    /// When the first change staged since the last publication was read, if said.
    read: Option<std::time::Instant>,
}

/// A copy of `t` whose IPv4 FIB is allocated with `advise` (the IPv6 FIB stays shared).
fn fork(t: &RouterTables, advise: Advice) -> RouterTables {
    RouterTables {
        v4: t.v4.copy_advised(advise),
        v6: t.v6.clone(),
        ports: t.ports.clone(),
        icmp_rate: t.icmp_rate,
        icmp_burst: t.icmp_burst,
        rfc1812_martians: t.rfc1812_martians,
        id: t.id,
        changes4: t.changes4.clone(),
    }
}

impl Incremental {
    /// Builds everything from `routes4` and `routes6` (as [`RouterTables::build_mirrored`]:
    /// of two routes for one prefix, the local table's wins, else the later), with ICMP limits
    /// `icmp` (rate, burst). The IPv4 routes are taken one at a time, never all at once.
    pub fn full(
        ports: Vec<PortSpec>,
        routes4: impl IntoIterator<Item = Mirrored4>,
        routes6: &[Mirrored6],
        icmp: (u32, u32),
        advise: Advice,
    ) -> Result<Incremental, TablesError> {
        let mut interner = Interner4::new();
        let mut routes: BTreeMap<Prefix, (NhIndex, RouteOrigin)> = BTreeMap::new();
        for r in routes4 {
            let local = |o: &RouteOrigin| matches!(o, RouteOrigin::Kernel { local_table: true, .. });
            if !r.local_table && routes.get(&r.prefix).is_some_and(|(_, o)| local(o)) {
                continue;
            }
            if let Some(nh) = interner.route(&ports, &r, r.prefix.addr().into())? {
                routes.insert(r.prefix, (nh, RouteOrigin::Kernel { protocol: r.protocol, local_table: r.local_table }));
            }
        }
        let list: Vec<(Prefix, NhIndex)> = routes.iter().map(|(p, (nh, _))| (*p, *nh)).collect();
        let fib = Fib::build_advised(&list, advise)?;
        let v6 = RouterTables::build_mirrored(ports.clone(), &[], routes6, advise)?.v6;
        let display = Arc::new(routes.iter().map(|(p, (nh, o))| (*p, *nh, *o)).collect());
        let v4 = Tables4 {
            fib,
            nexthops: interner.nexthops.clone(),
            routes: Arc::clone(&display),
            groups: interner.groups.clone(),
        };
        let live = Arc::new(RouterTables {
            v4,
            v6: v6.clone(),
            ports: ports.clone(),
            icmp_rate: icmp.0,
            icmp_burst: icmp.1,
            rfc1812_martians: false,
            id: next_id(),
            changes4: None,
        });
        // The spare is made now, so that the first change does not wait for a copy.
        let spare = Some(Arc::new(fork(&live, advise)));
        Ok(Incremental {
            ports,
            interner,
            routes,
            live,
            spare,
            lag: Vec::new(),
            pending: Vec::new(),
            v6,
            display,
            icmp,
            rfc1812_martians: false,
            retired: Vec::new(),
            copies: 0,
            advise,
            building: None,
            read: None,
        })
    }

    /// The tables last published (or built by [`Incremental::full`]), with the limits set.
    pub fn live(&self) -> Arc<RouterTables> {
        Arc::clone(&self.live)
    }

    /// IPv4 routes held.
    pub fn routes4(&self) -> usize {
        self.routes.len()
    }

    /// Next hops interned (the FIB names at most 32,767: past 30,000, build anew).
    pub fn nexthops(&self) -> usize {
        self.interner.nexthops.len()
    }

    /// `p`'s route is now `r` (`None`: it has none).
    pub fn set4(&mut self, p: Prefix, r: Option<&Mirrored4>) -> Result<(), TablesError> {
        let new = match r {
            Some(r) => self
                .interner
                .route(&self.ports, r, r.prefix.addr().into())?
                .map(|nh| (nh, RouteOrigin::Kernel { protocol: r.protocol, local_table: r.local_table })),
            None => None,
        };
        let old = match new {
            Some(v) => self.routes.insert(p, v),
            None => self.routes.remove(&p),
        };
        if old != new {
            self.pending.push(p);
        }
        Ok(())
    }

    /// The IPv6 routes are now `routes6`: their half is rebuilt.
    pub fn set6(&mut self, routes6: &[Mirrored6], advise: Advice) -> Result<(), TablesError> {
        self.v6 = RouterTables::build_mirrored(self.ports.clone(), &[], routes6, advise)?.v6;
        Ok(())
    }

    /// The ICMP limits the next publication carries.
    pub fn set_limits(&mut self, rate: u32, burst: u32) {
        self.icmp = (rate, burst);
    }

    /// Whether the next publication drops what RFC 1812 calls martians beyond the kernel's
    /// ([`RouterTables::rfc1812_martians`]).
    pub fn set_rfc1812_martians(&mut self, on: bool) {
        self.rfc1812_martians = on;
    }

    /// Rebuilds the display list from the routes now held (published with the next tables).
    pub fn refresh_display(&mut self) {
        self.building = None;
        self.display = Arc::new(self.routes.iter().map(|(p, (nh, o))| (*p, *nh, *o)).collect());
    }

    /// Rebuilds the display list a slice of at most `budget` routes at a time (a million take
    /// tens of milliseconds at once, which changes waiting behind them would pay): starts a
    /// rebuild if none is under way, adds the next slice, and installs the list when it is
    /// whole (true; published with the next tables). Routes that change while it is built
    /// appear as they were when their slice was read: a view of the last moments, not of one.
    pub fn display_step(&mut self, budget: usize) -> bool {
        let (mut list, after) = self.building.take().unwrap_or_else(|| (Vec::with_capacity(self.routes.len()), None));
        let from = match after {
            Some(p) => std::ops::Bound::Excluded(p),
            None => std::ops::Bound::Unbounded,
        };
        let before = list.len();
        list.extend(
            self.routes.range((from, std::ops::Bound::Unbounded)).take(budget).map(|(p, (nh, o))| (*p, *nh, *o)),
        );
        if list.len() - before < budget {
            self.display = Arc::new(list);
            return true;
        }
        let last = list.last().map(|e| e.0);
        self.building = Some((list, last));
        false
    }

    /// Says when the first change of the next publication was read (its notification); the
    /// earliest said is kept.
    pub fn changes_read(&mut self, at: std::time::Instant) {
        self.read = Some(self.read.map_or(at, |r| r.min(at)));
    }

    /// Whether the spare is free to be written (no reader holds it), or there is none.
    pub fn spare_free(&self) -> bool {
        self.spare.as_ref().is_none_or(|t| Arc::strong_count(t) == 1)
    }

    /// Publishes the changes made since the last publication: the new live tables. Writes the
    /// spare if no reader holds it; else copies the live tables if `may_copy`, or returns
    /// `None` (the changes wait for the next try).
    pub fn publish(&mut self, may_copy: bool) -> Result<Option<Arc<RouterTables>>, TablesError> {
        self.retired.retain(|t| Arc::strong_count(t) > 1);
        if !may_copy && !self.spare_free() {
            return Ok(None);
        }
        let spare = self.spare.take().and_then(|t| match Arc::try_unwrap(t) {
            Ok(t) => Some(t),
            Err(held) => {
                self.retired.push(held);
                None
            }
        });
        let mut t = match spare {
            Some(mut t) => {
                for p in &self.lag {
                    t.v4.fib.repaint(*p, &self.routes, |v| v.0)?;
                }
                t
            }
            None => {
                self.copies += 1;
                fork(&self.live, self.advise)
            }
        };
        let v4 = &mut t.v4;
        for p in &self.pending {
            v4.fib.repaint(*p, &self.routes, |v| v.0)?;
        }
        // Append-only: the spare's lists are a prefix of these.
        let n = v4.nexthops.len();
        v4.nexthops.extend_from_slice(&self.interner.nexthops[n..]);
        let g = v4.groups.len();
        v4.groups.extend_from_slice(&self.interner.groups[g..]);
        v4.routes = Arc::clone(&self.display);
        t.v6 = self.v6.clone();
        (t.icmp_rate, t.icmp_burst) = self.icmp;
        t.rfc1812_martians = self.rfc1812_martians;
        t.id = next_id();
        let mut changes = Changes4::new(self.live.id, self.pending.clone(), self.live.changes4.clone());
        changes.read = self.read.take();
        t.changes4 = Some(Arc::new(changes));
        let t = Arc::new(t);
        self.spare = Some(std::mem::replace(&mut self.live, Arc::clone(&t)));
        self.lag = std::mem::take(&mut self.pending);
        Ok(Some(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l3::fib::no_advice;
    use crate::l3::tables::{Path, RouteKind};
    use crate::wire::MacAddr;
    use crate::PortId;
    use core::net::Ipv4Addr;

    fn ports() -> Vec<PortSpec> {
        vec![crate::l3::testing::port("eth4", MacAddr([2, 0, 0, 0, 0, 4]), &["198.18.30.1/24"])]
    }

    fn via(p: Prefix, gw: u32) -> Mirrored4 {
        Mirrored4 {
            prefix: p,
            kind: RouteKind::Unicast,
            paths: vec![Path { gw: Some(Ipv4Addr::from(0xc612_1e00 | gw).into()), port: Some(PortId(0)), weight: 1 }],
            mtu: 0,
            protocol: 12,
            local_table: false,
        }
    }

    #[test]
    fn published_tables_match_a_full_build_whether_the_spare_is_free_or_still_read() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut want: BTreeMap<Prefix, Mirrored4> = BTreeMap::new();
        let mut inc = Incremental::full(ports(), Vec::new(), &[], (0, 1), no_advice).unwrap();
        let mut held = Vec::new();
        // A follower of the tables (as the XDP path's table follows them), told only which
        // prefixes changed since the tables it saw last, every other publication.
        let mut follower = (inc.live().id, inc.live().v4.fib.clone());
        for batch in 0..60 {
            for _ in 0..20 {
                let len = [8, 16, 22, 24, 24, 26, 32][(next() % 7) as usize];
                let p = Prefix::truncate(Ipv4Addr::from(0xc613_0000 | (next() as u32 & 0xffff)), len);
                let r = (next() % 4 != 0).then(|| via(p, (next() % 8 + 2) as u32));
                match &r {
                    Some(r) => want.insert(p, r.clone()),
                    None => want.remove(&p),
                };
                inc.set4(p, r.as_ref()).unwrap();
            }
            // Every third batch a reader keeps the tables: the next publication waits for
            // it, or copies when told it may.
            // (The tables held after batch k are the spare at batch k + 2.)
            if batch % 3 == 2 {
                assert!(!inc.spare_free());
                assert!(inc.publish(false).unwrap().is_none(), "waits for the reader");
            }
            let t = inc.publish(true).unwrap().unwrap();
            if batch % 3 == 0 {
                held.push(Arc::clone(&t));
            }
            let list: Vec<Mirrored4> = want.values().cloned().collect();
            let full = RouterTables::build_mirrored(ports(), &list, &[], no_advice).unwrap();
            for _ in 0..2000 {
                let a = Ipv4Addr::from(0xc613_0000 | (next() as u32 & 0xffff));
                assert_eq!(t.route(a), full.route(a), "{a} after batch {batch}");
            }
            assert_eq!(t.v4.routes.len(), 0, "the display list waits for a refresh");
            if batch % 2 == 1 {
                let changes = t.changes4.as_ref().expect("published from earlier tables");
                for p in changes.since(follower.0).expect("the chain reaches the follower's tables") {
                    follower.1.repaint_from(p, &t.v4.fib).unwrap();
                }
                follower.0 = t.id;
                for _ in 0..2000 {
                    let a = Ipv4Addr::from(0xc613_0000 | (next() as u32 & 0xffff));
                    assert_eq!(follower.1.lookup(a), t.v4.fib.lookup(a), "{a} after batch {batch}");
                }
            }
        }
        assert!(inc.live().changes4.as_ref().unwrap().since(0).is_none(), "no tables 0 in the chain");
        assert!(inc.copies >= 10, "held tables were copied, not written: {}", inc.copies);
        inc.refresh_display();
        let t = inc.publish(true).unwrap().unwrap();
        assert_eq!(t.v4.routes.len(), want.len());
        // A slice at a time, the same list.
        let mut steps = 0;
        while !inc.display_step(7) {
            steps += 1;
        }
        assert_eq!(steps, want.len() / 7);
        let t2 = inc.publish(true).unwrap().unwrap();
        assert_eq!(*t2.v4.routes, *t.v4.routes);
    }
}
