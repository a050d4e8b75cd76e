//! Wire compatibility between releases (issue 49 §6.5): the changes between an old and a new
//! protobuf descriptor set that break a reader of the other side — buf's WIRE category plus
//! its RPC rules. The wire and the store are binary protobuf, so a field is its number and wire
//! type: renaming a field is allowed, renumbering, retyping (outside a wire-compatible group),
//! changing its cardinality or oneof, or removing it without reserving its number is not.
//! `proto/released/` holds the last release's descriptor set; `api/tests/compat.rs` fails when
//! this build breaks it.

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet,
    ServiceDescriptorProto,
};
use std::collections::BTreeMap;
use std::fmt;

/// One breaking change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breaking {
    /// A message is gone.
    MessageRemoved {
        /// Its full name.
        message: String,
    },
    /// A field is gone and its number is not reserved.
    FieldRemoved {
        /// The message's full name.
        message: String,
        /// The field's number.
        number: i32,
        /// Its name.
        name: String,
    },
    /// A field's name now has another number.
    FieldRenumbered {
        /// The message's full name.
        message: String,
        /// The field's name.
        name: String,
        /// Its number in the old set.
        old: i32,
        /// Its number in the new set.
        new: i32,
    },
    /// A field number's type changed outside its wire-compatible group.
    FieldRetyped {
        /// The message's full name.
        message: String,
        /// The field's number.
        number: i32,
        /// The field's (new) name.
        name: String,
        /// The old type.
        old: String,
        /// The new type.
        new: String,
    },
    /// A field became repeated or singular.
    CardinalityChanged {
        /// The message's full name.
        message: String,
        /// The field's number.
        number: i32,
        /// The field's (new) name.
        name: String,
    },
    /// A field moved into, out of or between oneofs.
    OneofChanged {
        /// The message's full name.
        message: String,
        /// The field's number.
        number: i32,
        /// The field's (new) name.
        name: String,
    },
    /// An enum is gone.
    EnumRemoved {
        /// Its full name.
        name: String,
    },
    /// An enum value's number is gone and not reserved.
    EnumValueRemoved {
        /// The enum's full name.
        r#enum: String,
        /// The value's number.
        number: i32,
        /// Its name.
        name: String,
    },
    /// An enum value's name now has another number.
    EnumValueRenumbered {
        /// The enum's full name.
        r#enum: String,
        /// The value's name.
        name: String,
        /// Its old number.
        old: i32,
        /// Its new number.
        new: i32,
    },
    /// An RPC is gone.
    RpcRemoved {
        /// The service's full name.
        service: String,
        /// The method.
        method: String,
    },
    /// An RPC's request or response type changed.
    RpcTypeChanged {
        /// The service's full name.
        service: String,
        /// The method.
        method: String,
    },
    /// An RPC became streaming or stopped being.
    StreamingChanged {
        /// The service's full name.
        service: String,
        /// The method.
        method: String,
    },
}

impl fmt::Display for Breaking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MessageRemoved { message } => write!(f, "{message}: message removed"),
            Self::FieldRemoved {
                message,
                number,
                name,
            } => write!(
                f,
                "{message} field {number} ({name}): removed without reserving its number"
            ),
            Self::FieldRenumbered {
                message,
                name,
                old,
                new,
            } => write!(f, "{message} field {name}: renumbered {old} → {new}"),
            Self::FieldRetyped {
                message,
                number,
                name,
                old,
                new,
            } => write!(f, "{message} field {number} ({name}): {old} → {new}"),
            Self::CardinalityChanged {
                message,
                number,
                name,
            } => write!(
                f,
                "{message} field {number} ({name}): repeated changed to singular or back"
            ),
            Self::OneofChanged {
                message,
                number,
                name,
            } => write!(
                f,
                "{message} field {number} ({name}): moved into, out of or between oneofs"
            ),
            Self::EnumRemoved { name } => write!(f, "{name}: enum removed"),
            Self::EnumValueRemoved {
                r#enum,
                number,
                name,
            } => write!(
                f,
                "{enum} value {number} ({name}): removed without reserving its number"
            ),
            Self::EnumValueRenumbered {
                r#enum,
                name,
                old,
                new,
            } => write!(f, "{enum} value {name}: renumbered {old} → {new}"),
            Self::RpcRemoved { service, method } => write!(f, "{service}/{method}: RPC removed"),
            Self::RpcTypeChanged { service, method } => {
                write!(f, "{service}/{method}: request or response type changed")
            }
            Self::StreamingChanged { service, method } => {
                write!(f, "{service}/{method}: streaming changed")
            }
        }
    }
}

/// What a new release must do instead of a breaking change.
pub const RULE: &str = "never renumber, retype or remove a field, enum value, message or RPC \
a released build reads: add a new one, and reserve a removed field's number and name \
(`reserved 4; reserved \"old_name\";`)";

/// Every change from `old` to `new` that breaks a reader on either side.
pub fn breaking(old: &FileDescriptorSet, new: &FileDescriptorSet) -> Vec<Breaking> {
    let (old, new) = (Index::of(old), Index::of(new));
    let mut out = Vec::new();
    for (name, message) in &old.messages {
        match new.messages.get(name) {
            None => out.push(Breaking::MessageRemoved {
                message: name.clone(),
            }),
            Some(now) => fields(name, message, now, &mut out),
        }
    }
    for (name, e) in &old.enums {
        match new.enums.get(name) {
            None => out.push(Breaking::EnumRemoved { name: name.clone() }),
            Some(now) => enum_values(name, e, now, &mut out),
        }
    }
    for (name, s) in &old.services {
        let now = new.services.get(name);
        for m in &s.method {
            let method = m.name().to_string();
            let service = name.clone();
            match now.and_then(|n| n.method.iter().find(|x| x.name() == m.name())) {
                None => out.push(Breaking::RpcRemoved { service, method }),
                Some(x)
                    if x.input_type() != m.input_type() || x.output_type() != m.output_type() =>
                {
                    out.push(Breaking::RpcTypeChanged { service, method })
                }
                Some(x)
                    if x.client_streaming() != m.client_streaming()
                        || x.server_streaming() != m.server_streaming() =>
                {
                    out.push(Breaking::StreamingChanged { service, method })
                }
                Some(_) => {}
            }
        }
    }
    out
}

/// Messages, enums and services by full name (`flotilla.v1.Outer.Inner`).
#[derive(Default)]
struct Index<'a> {
    messages: BTreeMap<String, &'a DescriptorProto>,
    enums: BTreeMap<String, &'a EnumDescriptorProto>,
    services: BTreeMap<String, &'a ServiceDescriptorProto>,
}

impl<'a> Index<'a> {
    fn of(set: &'a FileDescriptorSet) -> Self {
        let mut index = Self::default();
        for file in &set.file {
            let package = file.package();
            for m in &file.message_type {
                index.message(package, m);
            }
            for e in &file.enum_type {
                index.enums.insert(join(package, e.name()), e);
            }
            for s in &file.service {
                index.services.insert(join(package, s.name()), s);
            }
        }
        index
    }

    fn message(&mut self, scope: &str, m: &'a DescriptorProto) {
        let name = join(scope, m.name());
        for nested in &m.nested_type {
            self.message(&name, nested);
        }
        for e in &m.enum_type {
            self.enums.insert(join(&name, e.name()), e);
        }
        self.messages.insert(name, m);
    }
}

fn join(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

fn reserved_field(m: &DescriptorProto, number: i32) -> bool {
    // Message reserved ranges are [start, end).
    m.reserved_range
        .iter()
        .any(|r| (r.start()..r.end()).contains(&number))
}

fn fields(message: &str, old: &DescriptorProto, new: &DescriptorProto, out: &mut Vec<Breaking>) {
    let message = message.to_string();
    for f in &old.field {
        if let Some(moved) = new
            .field
            .iter()
            .find(|n| n.name() == f.name() && n.number() != f.number())
        {
            out.push(Breaking::FieldRenumbered {
                message: message.clone(),
                name: f.name().into(),
                old: f.number(),
                new: moved.number(),
            });
            continue;
        }
        let Some(n) = new.field.iter().find(|n| n.number() == f.number()) else {
            if !reserved_field(new, f.number()) {
                out.push(Breaking::FieldRemoved {
                    message: message.clone(),
                    number: f.number(),
                    name: f.name().into(),
                });
            }
            continue;
        };
        let (number, name) = (n.number(), n.name().to_string());
        let (was, is) = (wire_type(f), wire_type(n));
        if !compatible(&was, &is) {
            out.push(Breaking::FieldRetyped {
                message: message.clone(),
                number,
                name,
                old: was,
                new: is,
            });
        } else if (f.label() == Label::Repeated) != (n.label() == Label::Repeated) {
            out.push(Breaking::CardinalityChanged {
                message: message.clone(),
                number,
                name,
            });
        } else if oneof(old, f) != oneof(new, n) {
            out.push(Breaking::OneofChanged {
                message: message.clone(),
                number,
                name,
            });
        }
    }
}

/// The real oneof a field is in (proto3 `optional` makes a synthetic one, not a change).
fn oneof<'a>(m: &'a DescriptorProto, f: &FieldDescriptorProto) -> Option<&'a str> {
    if f.proto3_optional() {
        return None;
    }
    f.oneof_index
        .and_then(|i| m.oneof_decl.get(i as usize))
        .map(|o| o.name())
}

/// A field's type as the wire sees it: the scalar name, or `message X` / `enum X`.
fn wire_type(f: &FieldDescriptorProto) -> String {
    let named = |kind: &str| format!("{kind} {}", f.type_name().trim_start_matches('.'));
    match f.r#type() {
        Type::Message | Type::Group => named("message"),
        Type::Enum => named("enum"),
        t => t.as_str_name().trim_start_matches("TYPE_").to_lowercase(),
    }
}

/// Whether a reader of `old` reads `new`'s bytes as the same value: buf's wire-compatible
/// groups.
fn compatible(old: &str, new: &str) -> bool {
    if old == new {
        return true;
    }
    let group = |t: &str| -> &'static str {
        match t {
            "int32" | "uint32" | "int64" | "uint64" | "bool" => "varint",
            t if t.starts_with("enum ") => "varint",
            "sint32" | "sint64" => "zigzag",
            "fixed32" | "sfixed32" => "fixed32",
            "fixed64" | "sfixed64" => "fixed64",
            "string" | "bytes" => "bytes",
            t if t.starts_with("message ") => "bytes-message",
            _ => "other",
        }
    };
    let (a, b) = (group(old), group(new));
    (a == b && a != "other" && a != "bytes-message")
        || (a == "bytes" && b == "bytes-message" && old == "bytes")
        || (b == "bytes" && a == "bytes-message" && new == "bytes")
}

fn enum_values(
    name: &str,
    old: &EnumDescriptorProto,
    new: &EnumDescriptorProto,
    out: &mut Vec<Breaking>,
) {
    for v in &old.value {
        if let Some(moved) = new
            .value
            .iter()
            .find(|n| n.name() == v.name() && n.number() != v.number())
        {
            out.push(Breaking::EnumValueRenumbered {
                r#enum: name.into(),
                name: v.name().into(),
                old: v.number(),
                new: moved.number(),
            });
        } else if !new.value.iter().any(|n| n.number() == v.number())
            // Enum reserved ranges are inclusive.
            && !new
                .reserved_range
                .iter()
                .any(|r| (r.start()..=r.end()).contains(&v.number()))
        {
            out.push(Breaking::EnumValueRemoved {
                r#enum: name.into(),
                number: v.number(),
                name: v.name().into(),
            });
        }
    }
}

#[cfg(test)]
mod tests;
