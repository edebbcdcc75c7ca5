//! A running forwarder: its threads, its XDP program and the live view; reloading the router's
//! tables while traffic flows; stopping. How one is started is in [`crate::io::setup::start`].

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::view::{LiveView, Report};
use crate::io::program::xdp::XdpProgram;
use crate::io::setup::memory::advise_huge_pages;
use crate::io::setup::options::XdpMode;
use crate::l3::tables::RouterLimits;
use crate::l3::tables::{RouteTarget4, RouteTarget6};
use crate::l3::{PortSpec, Prefix, Prefix6, RouterTables};
use crate::resolve::thread::Control as ArpControl;
use crate::wire::MacAddr;

/// A running forwarder.
#[derive(Debug)]
pub struct Forwarder {
    pub(super) view: Arc<LiveView>,
    /// Core of each worker, by queue (`None`: pinning failed, see warnings).
    pub cores: Vec<Option<usize>>,
    /// The XDP mode each port got, in port order.
    pub xdp_modes: Vec<XdpMode>,
    /// Whether the sockets are bound in zero-copy mode (else copy mode).
    pub zero_copy: bool,
    /// How the sockets are laid out over the ports' queues.
    pub layout: crate::io::setup::start::plan::Layout,
    /// Things the operator should know (no carrier, unused queues, tuning advice).
    pub warnings: Vec<String>,
    pub(super) stop: Arc<AtomicBool>,
    /// The workers' threads, then the ARP thread's.
    pub(super) threads: Vec<JoinHandle<()>>,
    pub(super) xdp: Option<XdpProgram>,
    pub(super) router: Option<RouterControl>,
    /// The longest frame each port sends (the bridge's check), by port.
    pub(super) frame_max: Arc<[std::sync::atomic::AtomicU32]>,
}

/// The longest frame a port of MTU `mtu` sends: the MTU, an Ethernet header and one VLAN tag
/// (what the kernel's bridge lets through, `is_skb_forwardable`).
pub fn frame_max(mtu: u32) -> u32 {
    mtu.saturating_add(crate::wire::ethernet::HEADER_LEN as u32 + 4)
}

/// What the control thread keeps to reload the router.
#[derive(Debug)]
pub(super) struct RouterControl {
    /// The ports as the tables are built from them; a MAC or MTU changed at run time is
    /// written here ([`Forwarder::port_changed`]).
    pub(super) specs: std::sync::Mutex<Vec<PortSpec>>,
    pub(super) limits: RouterLimits,
    pub(super) control: crossbeam_channel::Sender<ArpControl>,
    /// Kernel mode: the limits the kernel-mirror thread builds with, and whether they changed.
    pub(super) kernel: Option<Arc<std::sync::Mutex<(RouterLimits, bool)>>>,
}

impl Forwarder {
    /// Router mode: replaces the static routes, static neighbours and limits while traffic
    /// flows. The new tables are built aside and swapped in whole; a worker sees them from its
    /// next frame. On error nothing changes. A new neighbour table size needs a restart.
    pub fn reload_router(
        &self,
        routes: &[(Prefix, RouteTarget4)],
        routes6: &[(Prefix6, RouteTarget6)],
        neighbors: Vec<(Ipv4Addr, MacAddr)>,
        neighbors6: Vec<(Ipv6Addr, MacAddr)>,
        limits: RouterLimits,
    ) -> Result<(), String> {
        let (Some(rc), Some(rv)) = (&self.router, &self.view.router) else {
            return Err("not a router".into());
        };
        if limits.neighbors != rc.limits.neighbors {
            return Err("limits.neighbors changed: the neighbour table is sized at start; restart xfwd".into());
        }
        if let Some(k) = &rc.kernel {
            // The routes are the kernel's: only the limits reload; the next build takes them.
            if !(routes.is_empty() && routes6.is_empty() && neighbors.is_empty() && neighbors6.is_empty()) {
                return Err("the routes and neighbours come from the kernel ([fib] source = \"kernel\")".into());
            }
            *k.lock().unwrap_or_else(|p| p.into_inner()) = (limits, true);
            let _ = rc.control.send(ArpControl::GleanQueue(limits.glean_queue));
            return Ok(());
        }
        let specs = rc.specs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut t = RouterTables::build_dual(specs, routes, routes6, advise_huge_pages).map_err(|e| e.to_string())?;
        t.icmp_rate = limits.icmp_rate;
        t.icmp_burst = limits.icmp_burst;
        t.rfc1812_martians = limits.rfc1812_martians;
        rv.tables.store(Arc::new(t));
        let _ = rc.control.send(ArpControl::GleanQueue(limits.glean_queue));
        let _ = rc.control.send(ArpControl::StaticNeighbors(neighbors));
        let _ = rc.control.send(ArpControl::StaticNeighbors6(neighbors6));
        Ok(())
    }

    /// Router mode: port `port`'s MAC or MTU changed at run time (read from the system). The
    /// next tables built take them: with `[fib] source = "kernel"` the kernel-mirror thread
    /// has already (it follows link notifications), and nothing is left to do (`false`); with
    /// routes from the file the caller rebuilds the tables now, with the running routes
    /// ([`Forwarder::reload_router`]), and this returns `true`. A bridge takes the new MTU
    /// (frames longer than it allows are not sent to the port) and returns `false`.
    pub fn port_changed(&self, port: usize, mac: MacAddr, mtu: u32) -> bool {
        if let Some(m) = self.frame_max.get(port) {
            m.store(frame_max(mtu), Ordering::Relaxed);
        }
        let Some(rc) = &self.router else { return false };
        let mut specs = rc.specs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(spec) = specs.get_mut(port) else { return false };
        spec.mac = mac;
        spec.mtu = mtu;
        rc.kernel.is_none()
    }

    /// Router mode, routes from the file: announces the box's addresses on `port` with the MAC
    /// the current tables have (after [`Forwarder::port_changed`] and the rebuild), so that
    /// neighbours stop sending to the old one. With `[fib] source = "kernel"` the kernel
    /// answers ARP and neighbour discovery, and announces by itself; nothing is sent.
    pub fn announce(&self, port: usize) {
        if let Some(rc) = self.router.as_ref().filter(|rc| rc.kernel.is_none()) {
            let _ = rc.control.send(ArpControl::Announce(crate::PortId(port as u8)));
        }
    }

    /// Whether every worker thread is still running (false: one died, the forwarder is broken).
    pub fn workers_alive(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// The live view for stats readers.
    pub fn view(&self) -> Arc<LiveView> {
        Arc::clone(&self.view)
    }

    /// Detaches the program, stops and joins the workers, and returns the final counters.
    pub fn stop(mut self) -> Report {
        self.shutdown();
        self.view.report()
    }

    fn shutdown(&mut self) {
        // Detach first: from here on frames go to the kernel instead of into sockets nobody reads.
        if let Some(mut x) = self.xdp.take() {
            x.detach_all();
            // Keep the maps (counters) alive until the final report: the view holds its own handle.
            drop(x);
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}
