//! Redis' geohash arithmetic (`geohash.c`, `geohash_helper.c`): the 52-bit interleaved score
//! a member's position is stored as, the nine boxes a radius or box search scans, the
//! haversine distance on Redis' Earth radius, and the texts Redis prints.
//!
//! Everything is computed with the same floating-point operations in the same order as
//! Redis (the trigonometric functions are the platform's libm, as Redis'), so that scores,
//! distances and coordinates agree to the last bit.

/// Bits per coordinate in a stored score (26 × 2 = 52).
pub const STEP_MAX: u8 = 26;
/// Latitudes Redis accepts (the Web Mercator limits).
pub const LATITUDE_MIN: f64 = -85.051_128_78;
/// See [`LATITUDE_MIN`].
pub const LATITUDE_MAX: f64 = 85.051_128_78;
/// Longitudes Redis accepts.
pub const LONGITUDE_MIN: f64 = -180.0;
/// See [`LONGITUDE_MIN`].
pub const LONGITUDE_MAX: f64 = 180.0;
/// Redis' Earth radius (the quadratic mean radius of WGS-84), in meters.
const EARTH_RADIUS_METERS: f64 = 6_372_797.560_856;
/// Half the Web Mercator world width, in meters: where the step estimate stops doubling.
const MERCATOR_MAX: f64 = 20_037_726.37;
/// Doublings after which the step estimate stops (from the smallest positive double to
/// [`MERCATOR_MAX`] takes about 1,100).
const DOUBLINGS_MAX: u32 = 2_100;
/// Degrees to radians, as Redis computes it.
const DEGREES_TO_RADIANS: f64 = std::f64::consts::PI / 180.0;

/// A geohash: `step` bits per coordinate, interleaved (longitude in the odd bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hash {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate; a zero hash (`bits` and `step` 0) means "no box".
    pub step: u8,
}

impl Hash {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A range of one coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Range {
    /// Lowest value.
    pub min: f64,
    /// Highest value.
    pub max: f64,
}

/// The area a hash covers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Area {
    /// Longitudes covered.
    pub longitude: Range,
    /// Latitudes covered.
    pub latitude: Range,
}

const WGS84_LONGITUDE: Range = Range {
    min: LONGITUDE_MIN,
    max: LONGITUDE_MAX,
};
const WGS84_LATITUDE: Range = Range {
    min: LATITUDE_MIN,
    max: LATITUDE_MAX,
};

fn radians(degrees: f64) -> f64 {
    degrees * DEGREES_TO_RADIANS
}

fn degrees(radians: f64) -> f64 {
    radians / DEGREES_TO_RADIANS
}

/// The low 32 bits of `value` moved to the even bit positions.
fn spread(value: u32) -> u64 {
    (0..32).fold(0u64, |out, bit| {
        out | (u64::from((value >> bit) & 1) << (2 * bit))
    })
}

/// The even bits of `value`, gathered.
fn gather(value: u64) -> u32 {
    (0..32).fold(0u32, |out, bit| {
        out | (u32::from(u8::from((value >> (2 * bit)) & 1 == 1)) << bit)
    })
}

/// C's conversion of a non-negative double below 2^32 to `uint32_t` (truncation).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn truncate_u32(value: f64) -> u32 {
    value as u32
}

/// Redis' `geohashEncode`: the `step`-bit hash of a position within the ranges, or `None`
/// outside them.
#[must_use]
pub fn encode(
    longitude_range: Range,
    latitude_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONGITUDE_MIN..=LONGITUDE_MAX).contains(&longitude)
        || !(LATITUDE_MIN..=LATITUDE_MAX).contains(&latitude)
        || latitude < latitude_range.min
        || latitude > latitude_range.max
        || longitude < longitude_range.min
        || longitude > longitude_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let latitude_offset =
        (latitude - latitude_range.min) / (latitude_range.max - latitude_range.min) * scale;
    let longitude_offset =
        (longitude - longitude_range.min) / (longitude_range.max - longitude_range.min) * scale;
    let bits =
        spread(truncate_u32(latitude_offset)) | (spread(truncate_u32(longitude_offset)) << 1);
    Some(Hash { bits, step })
}

/// The 52-bit score Redis stores for a position (already checked to be in range).
#[must_use]
pub fn score_of(longitude: f64, latitude: f64) -> u64 {
    encode(
        WGS84_LONGITUDE,
        WGS84_LATITUDE,
        longitude,
        latitude,
        STEP_MAX,
    )
    .map_or(0, align_52)
}

/// Redis' `geohashAlign52Bits`.
fn align_52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// Redis' `geohashDecode` over the WGS-84 ranges.
fn decode(hash: Hash) -> Area {
    let separated_latitude = gather(hash.bits);
    let separated_longitude = gather(hash.bits >> 1);
    let cells = (1u64 << hash.step) as f64;
    let latitude_scale = LATITUDE_MAX - LATITUDE_MIN;
    let longitude_scale = LONGITUDE_MAX - LONGITUDE_MIN;
    let edge = |index: u32, range_min: f64, scale: f64| {
        range_min + (f64::from(index) * 1.0 / cells) * scale
    };
    Area {
        latitude: Range {
            min: edge(separated_latitude, LATITUDE_MIN, latitude_scale),
            max: edge(
                separated_latitude.wrapping_add(1),
                LATITUDE_MIN,
                latitude_scale,
            ),
        },
        longitude: Range {
            min: edge(separated_longitude, LONGITUDE_MIN, longitude_scale),
            max: edge(
                separated_longitude.wrapping_add(1),
                LONGITUDE_MIN,
                longitude_scale,
            ),
        },
    }
}

/// C's conversion of a double to `uint64_t` as x86-64 performs it (Redis converts any
/// sorted-set score this way, even one no GEOADD wrote): truncation, and for values out of
/// range the processor's answer.
#[must_use]
pub fn score_bits(score: f64) -> u64 {
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    // Reinterpreting the two's-complement bits, as the processor does.
    #[allow(clippy::cast_sign_loss)]
    let bits = if score < TWO_TO_63 {
        truncate_i64(score) as u64
    } else {
        (truncate_i64(score - TWO_TO_63) as u64) ^ (1 << 63)
    };
    bits
}

/// C's conversion of a double to `long long` on x86-64: truncation, and `i64::MIN` (the
/// "integer indefinite") when it does not fit or is NaN.
#[must_use]
pub fn truncate_i64(value: f64) -> i64 {
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    if value.is_nan() || !(-TWO_TO_63..TWO_TO_63).contains(&value) {
        i64::MIN
    } else {
        #[allow(clippy::cast_possible_truncation)]
        let truncated = value as i64;
        truncated
    }
}

/// The position (longitude, latitude) a stored score stands for: the center of its cell,
/// within the accepted ranges (Redis' `decodeGeohash`).
#[must_use]
pub fn position_of(score: f64) -> (f64, f64) {
    let area = decode(Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    });
    let longitude =
        ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONGITUDE_MIN, LONGITUDE_MAX);
    let latitude =
        ((area.latitude.min + area.latitude.max) / 2.0).clamp(LATITUDE_MIN, LATITUDE_MAX);
    (longitude, latitude)
}

/// The standard 11-character geohash of a stored score (GEOHASH): Redis decodes its own
/// hash (latitudes ±85.05) and encodes it again over ±90.
#[must_use]
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = position_of(score);
    let standard_latitude = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(
        WGS84_LONGITUDE,
        standard_latitude,
        longitude,
        latitude,
        STEP_MAX,
    )
    .map_or(0, |hash| hash.bits);
    let mut text = [b'0'; 11];
    for (index, slot) in text.iter_mut().enumerate().take(10) {
        let symbol = (bits >> (52 - (index + 1) * 5)) & 0x1f;
        *slot = ALPHABET[usize::try_from(symbol).unwrap_or(0)];
    }
    text
}

fn move_longitude(hash: &mut Hash, direction: i8) {
    if direction == 0 {
        return;
    }
    let width = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let filler = 0x5555_5555_5555_5555u64 >> width;
    if direction > 0 {
        x = x.wrapping_add(filler + 1);
    } else {
        x = (x | filler).wrapping_sub(filler + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaa >> width;
    hash.bits = x | y;
}

fn move_latitude(hash: &mut Hash, direction: i8) {
    if direction == 0 {
        return;
    }
    let width = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let filler = 0xaaaa_aaaa_aaaa_aaaau64 >> width;
    if direction > 0 {
        y = y.wrapping_add(filler + 1);
    } else {
        y = (y | filler).wrapping_sub(filler + 1);
    }
    y &= 0x5555_5555_5555_5555 >> width;
    hash.bits = x | y;
}

fn neighbor(hash: Hash, longitude: i8, latitude: i8) -> Hash {
    let mut moved = hash;
    move_longitude(&mut moved, longitude);
    move_latitude(&mut moved, latitude);
    moved
}

/// Redis' `geohashEstimateStepsByRadius`.
fn steps_for_radius(radius_meters: f64, latitude: f64) -> u8 {
    if radius_meters == 0.0 {
        return STEP_MAX;
    }
    let mut range = radius_meters;
    let mut step: i32 = 1;
    let mut doublings = 0;
    while range < MERCATOR_MAX && doublings < DOUBLINGS_MAX {
        range *= 2.0;
        step += 1;
        doublings += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    u8::try_from(step.clamp(1, i32::from(STEP_MAX))).unwrap_or(STEP_MAX)
}

/// What a search looks for around its center.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// Within a radius, in meters.
    Circle {
        /// The radius, in the search's unit.
        radius: f64,
    },
    /// Within an axis-aligned box.
    Box {
        /// The width, in the search's unit.
        width: f64,
        /// The height, in the search's unit.
        height: f64,
    },
}

/// A search: its center, shape, and the meters in one of its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Longitude of the center.
    pub longitude: f64,
    /// Latitude of the center.
    pub latitude: f64,
    /// The shape.
    pub shape: Shape,
    /// Meters per unit (m 1, km 1000, ft 0.3048, mi 1609.34).
    pub meters_per_unit: f64,
}

impl Search {
    /// Redis' `geohashBoundingBox`: west, south, east, north limits.
    fn bounds(&self) -> [f64; 4] {
        let (half_height, half_width) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.meters_per_unit * half_height;
        let width = self.meters_per_unit * half_width;
        let latitude_delta = degrees(height / EARTH_RADIUS_METERS);
        let longitude_delta_top =
            degrees(width / EARTH_RADIUS_METERS / radians(self.latitude + latitude_delta).cos());
        let longitude_delta_bottom =
            degrees(width / EARTH_RADIUS_METERS / radians(self.latitude - latitude_delta).cos());
        let longitude_delta = if self.latitude < 0.0 {
            longitude_delta_bottom
        } else {
            longitude_delta_top
        };
        [
            self.longitude - longitude_delta,
            self.latitude - latitude_delta,
            self.longitude + longitude_delta,
            self.latitude + latitude_delta,
        ]
    }

    /// The boxes to scan, in Redis' order (center, N, S, E, W, NE, NW, SE, SW), with the
    /// ones Redis leaves out already removed (zero, or the same as the last one scanned).
    #[must_use]
    pub fn boxes(&self) -> Vec<Hash> {
        let [west, south, east, north] = self.bounds();
        let radius_meters = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.meters_per_unit;
        let mut steps = steps_for_radius(radius_meters, self.latitude);
        let at = |steps: u8| {
            encode(
                WGS84_LONGITUDE,
                WGS84_LATITUDE,
                self.longitude,
                self.latitude,
                steps,
            )
            .unwrap_or(Hash {
                bits: 0,
                step: steps,
            })
        };
        let mut hash = at(steps);
        let too_small = {
            let north_area = decode(neighbor(hash, 0, 1));
            let south_area = decode(neighbor(hash, 0, -1));
            let east_area = decode(neighbor(hash, 1, 0));
            let west_area = decode(neighbor(hash, -1, 0));
            north_area.latitude.max < north
                || south_area.latitude.min > south
                || east_area.longitude.max < east
                || west_area.longitude.min > west
        };
        if steps > 1 && too_small {
            steps -= 1;
            hash = at(steps);
        }
        let area = decode(hash);
        // Redis' neighbour order: N S E W NE NW SE SW.
        let mut neighbors = [
            neighbor(hash, 0, 1),
            neighbor(hash, 0, -1),
            neighbor(hash, 1, 0),
            neighbor(hash, -1, 0),
            neighbor(hash, 1, 1),
            neighbor(hash, -1, 1),
            neighbor(hash, 1, -1),
            neighbor(hash, -1, -1),
        ];
        if steps >= 2 {
            let mut drop = |indexes: [usize; 3]| {
                for index in indexes {
                    neighbors[index] = Hash::default();
                }
            };
            if area.latitude.min < south {
                drop([1, 7, 6]);
            }
            if area.latitude.max > north {
                drop([0, 4, 5]);
            }
            if area.longitude.min < west {
                drop([3, 7, 5]);
            }
            if area.longitude.max > east {
                drop([2, 6, 4]);
            }
        }
        let all: Vec<Hash> = std::iter::once(hash).chain(neighbors).collect();
        let mut boxes = Vec::with_capacity(all.len());
        // Redis compares a box with the last one scanned, except when that was the center.
        let mut last_scanned: Option<usize> = None;
        for (index, candidate) in all.iter().enumerate() {
            if candidate.is_zero() {
                continue;
            }
            if let Some(last) = last_scanned
                && last != 0
                && all[last] == *candidate
            {
                continue;
            }
            boxes.push(*candidate);
            last_scanned = Some(index);
        }
        boxes
    }

    /// Whether a point is inside the shape; its distance from the center in meters then.
    #[must_use]
    pub fn distance_if_inside(&self, longitude: f64, latitude: f64) -> Option<f64> {
        match self.shape {
            Shape::Circle { radius } => {
                let distance = distance(self.longitude, self.latitude, longitude, latitude);
                (distance <= radius * self.meters_per_unit).then_some(distance)
            }
            Shape::Box { width, height } => {
                let width = width * self.meters_per_unit;
                let height = height * self.meters_per_unit;
                if latitude_distance(latitude, self.latitude) > height / 2.0 {
                    return None;
                }
                if distance(longitude, latitude, self.longitude, latitude) > width / 2.0 {
                    return None;
                }
                Some(distance(self.longitude, self.latitude, longitude, latitude))
            }
        }
    }
}

/// The score range `[min, max)` of the members inside a box (Redis' `scoresOfGeoHashBox`).
#[must_use]
pub fn score_range(hash: Hash) -> (f64, f64) {
    let next = Hash {
        bits: hash.bits.wrapping_add(1),
        ..hash
    };
    // Both are below 2^53, so exact as doubles.
    #[allow(clippy::cast_precision_loss)]
    let range = (align_52(hash) as f64, align_52(next) as f64);
    range
}

fn latitude_distance(latitude_a: f64, latitude_b: f64) -> f64 {
    EARTH_RADIUS_METERS * (radians(latitude_b) - radians(latitude_a)).abs()
}

/// Redis' `geohashGetDistance`: the haversine distance in meters.
#[must_use]
pub fn distance(longitude_a: f64, latitude_a: f64, longitude_b: f64, latitude_b: f64) -> f64 {
    let longitude_a = radians(longitude_a);
    let longitude_b = radians(longitude_b);
    let v = ((longitude_b - longitude_a) / 2.0).sin();
    if v == 0.0 {
        return latitude_distance(latitude_a, latitude_b);
    }
    let latitude_a = radians(latitude_a);
    let latitude_b = radians(latitude_b);
    let u = ((latitude_b - latitude_a) / 2.0).sin();
    let a = u * u + latitude_a.cos() * latitude_b.cos() * v * v;
    2.0 * EARTH_RADIUS_METERS * a.sqrt().asin()
}

/// A distance as Redis prints it (`fixedpoint_d2string` with four decimals: the value
/// times 10⁴ rounded half to even, then the decimal point put back).
#[must_use]
pub fn format_distance(value: f64) -> String {
    if value == 0.0 {
        return "0.0000".to_owned();
    }
    let scaled = truncate_i64((value * 10_000.0).round_ties_even());
    let negative = scaled < 0;
    let magnitude = scaled.unsigned_abs();
    let (whole, fraction) = (magnitude / 10_000, magnitude % 10_000);
    format!("{}{whole}.{fraction:04}", if negative { "-" } else { "" })
}

/// A coordinate as Redis prints it (`%.17Lf`, then trailing zeros and a bare point
/// removed, and `-0` printed `0`).
#[must_use]
pub fn format_coordinate(value: f64) -> String {
    let mut text = format!("{value:.17}");
    if text.contains('.') {
        let trimmed = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(trimmed);
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves scores and positions match redis-server's for Redis' documentation example
    // (GEOADD Sicily 13.361389 38.115556 Palermo: score 3479099956230698, GEOPOS
    // 13.36138933897018433 38.11555639549629859, GEOHASH sqc8b49rny0).
    #[test]
    fn palermo() {
        let score = score_of(13.361389, 38.115556);
        assert_eq!(score, 3_479_099_956_230_698);
        #[allow(clippy::cast_precision_loss)]
        let (longitude, latitude) = position_of(score as f64);
        assert_eq!(format_coordinate(longitude), "13.36138933897018433");
        assert_eq!(format_coordinate(latitude), "38.11555639549629859");
        #[allow(clippy::cast_precision_loss)]
        let hash = standard_geohash(score as f64);
        assert_eq!(&hash, b"sqc8b49rny0");
    }

    // Proves the distance and its text match Redis' (GEODIST Sicily Palermo Catania).
    #[test]
    fn palermo_to_catania() {
        #[allow(clippy::cast_precision_loss)]
        let (a, b) = (
            position_of(score_of(13.361389, 38.115556) as f64),
            position_of(score_of(15.087269, 37.502669) as f64),
        );
        assert_eq!(format_distance(distance(a.0, a.1, b.0, b.1)), "166274.1516");
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.00005), "0.0000");
        assert_eq!(format_distance(1.23456), "1.2346");
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(1.5), "1.5");
    }

    // Proves out-of-range conversions follow x86-64, as Redis' casts do.
    #[test]
    fn casts() {
        assert_eq!(score_bits(-1.0), u64::MAX);
        assert_eq!(score_bits(f64::INFINITY), 0);
        assert_eq!(score_bits(1.9), 1);
        assert_eq!(truncate_i64(f64::NAN), i64::MIN);
        assert_eq!(truncate_i64(-2.5), -2);
    }
}
