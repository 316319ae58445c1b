//! Word lists the generated records draw from: countries with their cities, locales and
//! mobile operators; device models; OS versions; names for app code.
//!
//! Not formatted by rustfmt (see `lib.rs`): one entry per line reads better for tables.

/// A mobile operator: name, MCC, MNC.
pub(crate) type Operator = (&'static str, i64, i64);

#[derive(Debug)]
pub(crate) struct Country {
    pub iso: &'static str,
    /// Relative share of devices.
    pub weight: u32,
    /// The first locale is the most common one.
    pub locales: &'static [&'static str],
    /// English names, most populous first.
    pub cities: &'static [&'static str],
    pub operators: &'static [Operator],
    /// First two octets of IPv4 networks in the country.
    pub ipv4: &'static [(u8, u8)],
    /// First two groups of IPv6 prefixes in the country.
    pub ipv6: &'static [(u16, u16)],
}

macro_rules! country {
    ($iso:literal, $w:literal, [$($l:literal),*], [$($c:literal),*], [$($o:expr),*], [$($v4:expr),*], [$($v6:expr),*]) => {
        Country { iso: $iso, weight: $w, locales: &[$($l),*], cities: &[$($c),*],
                  operators: &[$($o),*], ipv4: &[$($v4),*], ipv6: &[$($v6),*] }
    };
}

pub(crate) static COUNTRIES: &[Country] = &[
    country!("US", 22, ["en_US", "es_US"],
        ["New York", "Los Angeles", "Chicago", "Houston", "Phoenix", "Seattle", "San Francisco", "Miami", "Boston", "Denver"],
        [("AT&T", 310, 410), ("T-Mobile", 310, 260), ("Verizon", 311, 480)],
        [(73, 12), (98, 207), (174, 201), (107, 77)], [(0x2600, 0x1700), (0x2607, 0xfb90), (0x2600, 0x1000)]),
    country!("RU", 10, ["ru_RU", "en_US"],
        ["Moscow", "Saint Petersburg", "Novosibirsk", "Yekaterinburg", "Kazan", "Nizhny Novgorod", "Krasnodar"],
        [("MTS", 250, 1), ("MegaFon", 250, 2), ("Beeline", 250, 99), ("Tele2", 250, 20)],
        [(95, 24), (178, 176), (188, 162), (46, 39)], [(0x2a00, 0x1fa0), (0x2a00, 0x1370), (0x2a03, 0xd000)]),
    country!("IN", 9, ["en_IN", "hi_IN"],
        ["Mumbai", "Delhi", "Bengaluru", "Hyderabad", "Chennai", "Kolkata", "Pune"],
        [("Jio", 405, 857), ("Airtel", 404, 10), ("Vi India", 404, 20)],
        [(49, 36), (106, 200), (117, 96)], [(0x2409, 0x4040), (0x2401, 0x4900)]),
    country!("BR", 8, ["pt_BR"],
        ["São Paulo", "Rio de Janeiro", "Belo Horizonte", "Brasília", "Salvador", "Fortaleza", "Curitiba", "Porto Alegre"],
        [("Vivo", 724, 6), ("Claro BR", 724, 5), ("TIM", 724, 4), ("Oi", 724, 31)],
        [(177, 32), (189, 4), (200, 150)], [(0x2804, 0x14c), (0x2804, 0x7f0), (0x2804, 0x431)]),
    country!("DE", 7, ["de_DE", "en_US", "tr_DE"],
        ["Berlin", "Hamburg", "Munich", "Cologne", "Frankfurt am Main", "Stuttgart", "Düsseldorf", "Leipzig"],
        [("Telekom.de", 262, 1), ("Vodafone.de", 262, 2), ("o2 - de", 262, 3)],
        [(79, 192), (91, 64), (84, 128)], [(0x2003, 0xe2), (0x2a02, 0x8108), (0x2a01, 0xc22)]),
    country!("GB", 5, ["en_GB"],
        ["London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Edinburgh", "Bristol"],
        [("EE", 234, 30), ("O2 - UK", 234, 10), ("Vodafone UK", 234, 15), ("Three", 234, 20)],
        [(86, 128), (82, 132), (90, 200)], [(0x2a00, 0x23c6), (0x2a02, 0xc7f)]),
    country!("FR", 4, ["fr_FR", "en_US"],
        ["Paris", "Marseille", "Lyon", "Toulouse", "Nice", "Nantes", "Montpellier"],
        [("Orange F", 208, 1), ("SFR", 208, 10), ("Bouygues Telecom", 208, 20), ("Free Mobile", 208, 15)],
        [(90, 3), (82, 64), (78, 192)], [(0x2a01, 0xcb00), (0x2a01, 0xe0a)]),
    country!("ID", 4, ["id_ID", "en_US"],
        ["Jakarta", "Surabaya", "Bandung", "Medan", "Semarang"],
        [("Telkomsel", 510, 10), ("Indosat Ooredoo", 510, 1), ("XL Axiata", 510, 11)],
        [(36, 68), (114, 124), (180, 252)], [(0x2001, 0x448a), (0x2400, 0x9800)]),
    country!("TR", 3, ["tr_TR"],
        ["Istanbul", "Ankara", "İzmir", "Bursa", "Antalya"],
        [("Turkcell", 286, 1), ("Vodafone TR", 286, 2), ("Türk Telekom", 286, 3)],
        [(78, 160), (88, 224), (176, 88)], [(0x2a02, 0xff0)]),
    country!("PL", 3, ["pl_PL"],
        ["Warsaw", "Kraków", "Łódź", "Wrocław", "Poznań", "Gdańsk"],
        [("Plus", 260, 1), ("T-Mobile.pl", 260, 2), ("Orange", 260, 3), ("Play", 260, 6)],
        [(83, 24), (89, 64), (31, 60)], [(0x2a02, 0xa31a), (0x2a01, 0x110f)]),
    country!("JP", 3, ["ja_JP"],
        ["Tokyo", "Osaka", "Yokohama", "Nagoya", "Sapporo", "Fukuoka"],
        [("NTT DOCOMO", 440, 10), ("SoftBank", 440, 20), ("au", 440, 50)],
        [(126, 0), (153, 120), (60, 64)], [(0x2400, 0x4050), (0x240b, 0x10)]),
    country!("ES", 3, ["es_ES", "ca_ES"],
        ["Madrid", "Barcelona", "Valencia", "Seville", "Málaga", "Zaragoza"],
        [("Vodafone ES", 214, 1), ("Orange", 214, 3), ("Movistar", 214, 7), ("Yoigo", 214, 4)],
        [(83, 32), (88, 0), (79, 144)], [(0x2a0c, 0x5a80), (0x2a02, 0x9130)]),
    country!("MX", 3, ["es_MX", "en_US"],
        ["Mexico City", "Guadalajara", "Monterrey", "Puebla", "Tijuana", "Mérida"],
        [("Telcel", 334, 20), ("AT&T MX", 334, 50), ("Movistar", 334, 30)],
        [(187, 188), (189, 203), (201, 141)], [(0x2806, 0x10a6), (0x2806, 0x2f0)]),
    country!("IT", 3, ["it_IT"],
        ["Rome", "Milan", "Naples", "Turin", "Florence", "Bologna"],
        [("TIM", 222, 1), ("Vodafone IT", 222, 10), ("WINDTRE", 222, 88), ("Iliad", 222, 50)],
        [(79, 20), (93, 34), (151, 38)], [(0x2a01, 0xe11), (0x2001, 0xb07)]),
    country!("KZ", 2, ["ru_KZ", "kk_KZ"],
        ["Almaty", "Astana", "Shymkent", "Karaganda"],
        [("Beeline KZ", 401, 1), ("Kcell", 401, 2), ("Tele2 KZ", 401, 77)],
        [(2, 132), (95, 56), (37, 99)], [(0x2a04, 0x2f00)]),
    country!("CA", 2, ["en_CA", "fr_CA"],
        ["Toronto", "Montréal", "Vancouver", "Calgary", "Ottawa", "Québec City"],
        [("Rogers", 302, 720), ("Bell", 302, 610), ("TELUS", 302, 220)],
        [(24, 114), (99, 224), (70, 48)], [(0x2607, 0xfea8), (0x2001, 0x56a)]),
    country!("UA", 2, ["uk_UA", "ru_UA"],
        ["Kyiv", "Kharkiv", "Odesa", "Dnipro", "Lviv"],
        [("Kyivstar", 255, 3), ("Vodafone UA", 255, 1), ("lifecell", 255, 6)],
        [(93, 72), (176, 36), (46, 211)], [(0x2a02, 0x2378)]),
    country!("VN", 2, ["vi_VN", "en_US"],
        ["Ho Chi Minh City", "Hanoi", "Đà Nẵng", "Hải Phòng"],
        [("Viettel", 452, 4), ("Vinaphone", 452, 2), ("MobiFone", 452, 1)],
        [(113, 160), (14, 160), (171, 224)], [(0x2402, 0x800), (0x2405, 0x4802)]),
    country!("EG", 2, ["ar_EG", "en_US"],
        ["Cairo", "Alexandria", "Giza"],
        [("Vodafone EG", 602, 2), ("Orange EG", 602, 1), ("Etisalat", 602, 3)],
        [(41, 33), (197, 35), (156, 200)], [(0x2c0f, 0xfc88)]),
    country!("CH", 1, ["de_CH", "fr_CH", "it_CH"],
        ["Zürich", "Geneva", "Basel", "Bern", "Lausanne"],
        [("Swisscom", 228, 1), ("Sunrise", 228, 2), ("Salt", 228, 3)],
        [(85, 0), (178, 197), (213, 55)], [(0x2a02, 0x1210), (0x2a02, 0xaa10)]),
    country!("SE", 1, ["sv_SE", "en_US"],
        ["Stockholm", "Gothenburg", "Malmö", "Uppsala"],
        [("Telia", 240, 1), ("Tele2", 240, 7), ("Telenor SE", 240, 8), ("3 SE", 240, 2)],
        [(78, 70), (90, 224), (81, 224)], [(0x2001, 0x2043), (0x2a00, 0x801)]),
    country!("CZ", 1, ["cs_CZ"],
        ["Prague", "Brno", "Ostrava", "Plzeň"],
        [("T-Mobile CZ", 230, 1), ("O2 CZ", 230, 2), ("Vodafone CZ", 230, 3)],
        [(88, 100), (90, 176)], [(0x2a00, 0x1028)]),
];

/// Manufacturer, phone models, tablet models (most popular first).
pub(crate) type ModelFamily = (&'static str, &'static [&'static str], &'static [&'static str]);

pub(crate) static ANDROID_MODELS: &[ModelFamily] = &[
    ("Samsung", &["Galaxy A54 5G", "Galaxy A14", "Galaxy S23 Ultra", "Galaxy A34 5G", "Galaxy A52", "Galaxy A13",
        "Galaxy S24 Ultra", "Galaxy A53 5G", "Galaxy S21 FE 5G", "Galaxy A12", "Galaxy A15", "Galaxy A24", "Galaxy A25 5G",
        "Galaxy S22", "Galaxy S23", "Galaxy S24", "Galaxy A33 5G", "Galaxy A05s", "Galaxy A04", "Galaxy A03 Core",
        "Galaxy M33 5G", "Galaxy M31", "Galaxy M21", "Galaxy M12", "Galaxy S20 FE", "Galaxy S21", "Galaxy Note20 Ultra",
        "Galaxy Note10", "Galaxy Z Flip5", "Galaxy Z Fold5", "Galaxy Z Flip4", "Galaxy A55 5G", "Galaxy A35 5G",
        "Galaxy J7 Prime", "Galaxy A02"],
        &["Galaxy Tab A8", "Galaxy Tab A7 Lite", "Galaxy Tab S6 Lite", "Galaxy Tab S9", "Galaxy Tab S8", "Galaxy Tab A 10.1 (2019)"]),
    ("Xiaomi", &["Redmi Note 12", "Redmi Note 13 Pro", "Redmi Note 11", "Redmi 9A", "Redmi Note 10 Pro", "Redmi 12",
        "Redmi Note 13", "Redmi Note 8 Pro", "Redmi 13C", "Redmi Note 9 Pro", "Redmi Note 10S", "Redmi 10", "Redmi 9C",
        "Redmi A2", "Redmi Note 8", "Redmi Note 12 Pro", "POCO X5 Pro 5G", "POCO X3 Pro", "POCO X6 Pro", "POCO F5",
        "POCO M5", "Xiaomi 13T", "Xiaomi 14", "Xiaomi 12", "Mi 11 Lite", "Mi 9T"],
        &["Xiaomi Pad 6", "Redmi Pad SE"]),
    ("Google", &["Pixel 7", "Pixel 8 Pro", "Pixel 6a", "Pixel 8", "Pixel 7a", "Pixel 6", "Pixel 5", "Pixel 4a"], &["Pixel Tablet"]),
    ("HUAWEI", &["P30 lite", "P40 lite", "Y7 2019", "nova 9", "Mate 20 lite", "P smart 2021"], &["MatePad T10s"]),
    ("HONOR", &["X8", "90", "X7a", "10 Lite", "Magic5 Pro"], &[]),
    ("OPPO", &["A17", "A57", "A78", "Reno8", "Reno10 5G", "A5 2020", "A16"], &[]),
    ("vivo", &["Y21", "Y36", "V27", "Y17", "Y20"], &[]),
    ("realme", &["C35", "C53", "11 Pro+", "8", "C21Y", "GT Master Edition"], &[]),
    ("OnePlus", &["Nord 2T 5G", "Nord CE 3 Lite 5G", "11", "9 Pro", "8T"], &[]),
    ("motorola", &["moto g84 5G", "moto g54 5G", "moto g32", "moto e13", "edge 40"], &[]),
    ("Nokia", &["G21", "5.4", "C32"], &[]),
    ("Sony", &["Xperia 10 V", "Xperia 1 V", "Xperia 5 IV"], &[]),
    ("TECNO", &["SPARK 10", "CAMON 20"], &[]),
    ("Infinix", &["HOT 30", "NOTE 30"], &[]),
    ("Lenovo", &[], &["Tab M10", "Tab P11"]),
    ("Amazon", &[], &["Fire HD 10", "Fire 7"]),
];

pub(crate) static APPLE_MODELS: &[ModelFamily] = &[("Apple",
    &["iPhone 13", "iPhone 14 Pro Max", "iPhone 15 Pro Max", "iPhone 12", "iPhone 11", "iPhone 14", "iPhone 15 Pro",
      "iPhone 13 Pro Max", "iPhone 15", "iPhone 16 Pro Max", "iPhone 14 Pro", "iPhone 13 Pro", "iPhone 12 Pro Max",
      "iPhone 16 Pro", "iPhone 16", "iPhone SE (3rd generation)", "iPhone 12 Pro", "iPhone XR", "iPhone 11 Pro Max",
      "iPhone 15 Plus", "iPhone 14 Plus", "iPhone 13 mini", "iPhone SE (2nd generation)", "iPhone 11 Pro",
      "iPhone 12 mini", "iPhone XS", "iPhone XS Max", "iPhone X", "iPhone 8 Plus", "iPhone 8", "iPhone 7"],
    &["iPad (9th generation)", "iPad (10th generation)", "iPad Air (5th generation)", "iPad Pro 11-inch (4th generation)",
      "iPad mini (6th generation)", "iPad Pro 12.9-inch (6th generation)", "iPad Air (4th generation)", "iPad (8th generation)"])];

pub(crate) static WINDOWS_MODELS: &[ModelFamily] = &[
    ("Microsoft", &["Surface Laptop 5", "Surface Pro 9", "Surface Pro 7"], &["Surface Go 3"]),
    ("Dell", &["XPS 13 9310", "Inspiron 15 3520", "Latitude 5420"], &[]),
    ("HP", &["Pavilion Laptop 15", "EliteBook 840 G8", "Spectre x360"], &[]),
    ("LENOVO", &["ThinkPad T14 Gen 2", "IdeaPad 5 14ALC05", "Yoga 7 14ITL5"], &[]),
    ("ASUS", &["VivoBook 15", "ZenBook 14"], &[]),
    ("Acer", &["Aspire 5"], &[]),
];

/// OS versions with relative weights.
pub(crate) static ANDROID_VERSIONS: &[(&str, u32)] = &[
    ("14", 30), ("13", 24), ("12", 15), ("11", 11), ("10", 7), ("15", 5), ("9", 4), ("8.1.0", 2), ("8.0.0", 1), ("7.0", 1),
];
pub(crate) static IOS_VERSIONS: &[(&str, u32)] = &[
    ("18.0.1", 14), ("18.1", 16), ("17.6.1", 18), ("17.5.1", 9), ("17.4.1", 5), ("18.0", 8), ("17.7", 6), ("16.7.10", 6),
    ("16.6", 3), ("15.8.3", 3), ("17.3.1", 3), ("16.7.8", 2), ("15.7", 1), ("12.5.7", 1),
];
pub(crate) static WINDOWS_VERSIONS: &[(&str, u32)] =
    &[("10.0.22631", 45), ("10.0.19045", 35), ("10.0.26100", 12), ("10.0.22621", 8)];

/// Brand names for the generated apps (package `com.<brand lowercase>.app` etc.).
pub(crate) static BRANDS: &[&str] = &[
    "ShopWave", "QuickCab", "FitPulse", "Newsly", "TuneBox", "MapWise", "Chatterly", "Bankly", "FoodDash", "PhotoNest",
    "StudyBuddy", "TravelMate", "HomeHub", "PetPal", "GameOn", "CoinTrack",
];

/// Feature areas of app code (packages, folders, screens).
pub(crate) static FEATURES: &[&str] = &[
    "Checkout", "Feed", "Profile", "Cart", "Player", "Search", "Login", "Settings", "Chat", "Map", "Order", "Payment",
    "Catalog", "Onboarding", "Notification", "Wallet", "Booking", "Review",
];
pub(crate) static CLASS_SUFFIXES: &[&str] = &[
    "Fragment", "Activity", "ViewModel", "Adapter", "Repository", "Presenter", "UseCase", "Service", "Mapper",
    "ViewHolder", "Interactor", "Controller",
];
pub(crate) static SWIFT_SUFFIXES: &[&str] = &[
    "ViewController", "ViewModel", "Coordinator", "Service", "Cell", "Presenter", "Interactor", "Store", "View",
    "DataSource",
];
pub(crate) static JAVA_METHODS: &[&str] = &[
    "onCreate", "onViewCreated", "onResume", "onBindViewHolder", "bind", "render", "load", "invoke", "invokeSuspend",
    "handleResult", "onClick", "submit", "apply", "map", "update", "refresh", "onChanged", "parse", "execute", "emit",
];
pub(crate) static SWIFT_METHODS: &[&str] = &[
    "viewDidLoad()", "viewWillAppear(_:)", "tableView(_:cellForRowAt:)", "collectionView(_:didSelectItemAt:)",
    "configure(with:)", "handle(response:)", "load(page:)", "didTapBuy(_:)", "reload()", "update(state:completion:)",
    "decode(_:from:)", "start()", "apply(_:)", "refresh()",
];
pub(crate) static CSHARP_METHODS: &[&str] = &[
    "OnNavigatedTo(NavigationEventArgs e)", "OnLoaded(Object sender, RoutedEventArgs e)", "LoadAsync(CancellationToken token)",
    "Refresh()", "Button_Click(Object sender, RoutedEventArgs e)", "Parse(String json, JsonSerializerOptions options)",
    "SaveAsync(Int32 id, Boolean force)", "Render(Int32 width, Int32 height)",
];

/// Custom error names are `<domain><suffix>`, e.g. `PaymentDeclined`.
pub(crate) static CUSTOM_DOMAINS: &[&str] = &[
    "Payment", "Checkout", "Login", "Auth", "Token", "Feed", "Image", "Video", "Audio", "Sync", "Upload", "Download",
    "Cache", "Database", "Location", "Push", "Deeplink", "Billing", "Subscription", "Cart", "Search", "Profile", "Chat",
    "Map",
];
pub(crate) static CUSTOM_SUFFIXES: &[&str] = &[
    "Error", "Failed", "Timeout", "Declined", "Invalid", "NotFound", "Unavailable", "Cancelled", "Mismatch", "Exception",
    "Rejected", "Corrupted",
];

/// Screen actions for breadcrumbs (`tap:"<label>"`).
pub(crate) static BUTTON_LABELS: &[&str] = &[
    "Buy now", "Add to cart", "Pay, then continue", "Sign in", "OK", "Retry", "Share", "Save \"draft\"", "Next",
    "Play", "Send", "Search",
];
