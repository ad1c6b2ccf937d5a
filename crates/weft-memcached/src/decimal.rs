//! Decimal formatting of integers without allocation (replies are mostly numbers).

/// An integer's decimal digits, held on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
    negative: bool,
}

impl Decimal {
    /// The digits of `value`.
    pub(crate) fn unsigned(value: u64) -> Self {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut rest = value;
        loop {
            start -= 1;
            if let Some(slot) = digits.get_mut(start) {
                // `rest % 10` is below 10.
                *slot = b'0' + (rest % 10) as u8;
            }
            rest /= 10;
            if rest == 0 || start == 0 {
                break;
            }
        }
        Self {
            digits,
            start,
            negative: false,
        }
    }

    /// The digits of `value`, with a `-` when negative.
    pub(crate) fn signed(value: i64) -> Self {
        Self {
            negative: value < 0,
            ..Self::unsigned(value.unsigned_abs())
        }
    }

    /// Writes the number to `out`.
    pub(crate) fn put(&self, out: &mut bytes::BytesMut) {
        if self.negative {
            out.extend_from_slice(b"-");
        }
        out.extend_from_slice(self.digits.get(self.start..).unwrap_or_default());
    }

    /// The number as text (with its sign).
    pub(crate) fn to_vec(self) -> Vec<u8> {
        let mut text = Vec::with_capacity(21);
        if self.negative {
            text.push(b'-');
        }
        text.extend_from_slice(self.digits.get(self.start..).unwrap_or_default());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves formatting agrees with the standard library at the edges.
    #[test]
    fn formats_like_display() {
        for value in [0u64, 7, 10, 99, 1_000_000, u64::MAX] {
            assert_eq!(
                Decimal::unsigned(value).to_vec(),
                value.to_string().into_bytes()
            );
        }
        for value in [0i64, -1, -10, i64::MIN, i64::MAX] {
            assert_eq!(
                Decimal::signed(value).to_vec(),
                value.to_string().into_bytes()
            );
        }
    }
}
