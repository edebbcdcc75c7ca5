//! What to start and start-up: the request ([`config`]), the worker options ([`settings`],
//! [`options`]), the ports ([`port`]) and their drivers' quirks ([`drivers`]), start-up as a
//! pure plan then steps ([`start`]), the tables' memory ([`memory`]).

pub mod config;
pub mod drivers;
pub mod memory;
pub mod options;
pub mod port;
pub mod settings;
pub mod start;
