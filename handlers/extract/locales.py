"""Word lists behind `handlers.extract`: country and language names, currency words, cues.

Data only, no logic beyond `fold`, the key normaliser every table lookup uses. Names are
written as people write them (accents, capitals); `fold` strips both at lookup time, so
"Österreich", "osterreich" and "ÖSTERREICH" are one key. Languages covered by names:
English, Spanish, German, French, Portuguese, Italian, Russian, Polish, Dutch, Swedish;
the preference and amount words also cover Turkish and Ukrainian, the router's other two.
Regex fragments below are compiled case-insensitively by `handlers.extract`.
"""

from __future__ import annotations

import re
import unicodedata


def fold(text: str) -> str:
    """Lookup key: no accents, case-folded, no dots, hyphens/apostrophes as spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    bare = re.sub(r"[.\u00b7]", "", bare)
    return " ".join(re.sub(r"[-_/'’`]", " ", bare).split())


# ISO 3166 alpha-2 → (alpha-3, names in en/es/de/fr/pt/it/ru/pl/nl/sv and the local name).
COUNTRIES: dict[str, tuple[str, ...]] = {
    "AT": ("AUT", "Austria", "Österreich", "Autriche", "Áustria", "Австрия", "Oostenrijk",
           "Österrike"),
    "BE": ("BEL", "Belgium", "Bélgica", "Belgien", "Belgique", "Belgio", "Бельгия", "Belgia",
           "België"),
    "BG": ("BGR", "Bulgaria", "Bulgarien", "Bulgarie", "Bulgária", "Болгария", "Bułgaria",
           "Bulgarije", "България"),
    "HR": ("HRV", "Croatia", "Croacia", "Kroatien", "Croatie", "Croácia", "Croazia",
           "Хорватия", "Chorwacja", "Kroatië", "Hrvatska"),
    "CY": ("CYP", "Cyprus", "Chipre", "Zypern", "Chypre", "Cipro", "Кипр", "Cypr", "Cypern"),
    "CZ": ("CZE", "Czech Republic", "Czechia", "República Checa", "Chequia", "Tschechien",
           "Tschechische Republik", "République tchèque", "Tchéquie", "República Tcheca",
           "Chéquia", "Repubblica Ceca", "Cechia", "Чехия", "Czechy", "Tsjechië", "Tjeckien",
           "Česko", "Česká republika"),
    "DK": ("DNK", "Denmark", "Dinamarca", "Dänemark", "Danemark", "Danimarca", "Дания",
           "Dania", "Denemarken", "Danmark"),
    "EE": ("EST", "Estonia", "Estland", "Estonie", "Estónia", "Estônia", "Эстония", "Eesti"),
    "FI": ("FIN", "Finland", "Finlandia", "Finnland", "Finlande", "Finlândia", "Финляндия",
           "Suomi"),
    "FR": ("FRA", "France", "Francia", "Frankreich", "França", "Франция", "Francja",
           "Frankrijk", "Frankrike"),
    "DE": ("DEU", "Germany", "Alemania", "Deutschland", "Allemagne", "Alemanha", "Germania",
           "Германия", "Niemcy", "Duitsland", "Tyskland", "BRD"),
    "GR": ("GRC", "Greece", "Grecia", "Griechenland", "Grèce", "Grécia", "Греция", "Grecja",
           "Griekenland", "Grekland", "Hellas", "Ελλάδα"),
    "HU": ("HUN", "Hungary", "Hungría", "Ungarn", "Hongrie", "Hungria", "Ungheria", "Венгрия",
           "Węgry", "Hongarije", "Ungern", "Magyarország"),
    "IE": ("IRL", "Ireland", "Irlanda", "Irland", "Irlande", "Ирландия", "Irlandia", "Ierland",
           "Éire"),
    "IT": ("ITA", "Italy", "Italia", "Italien", "Italie", "Itália", "Италия", "Włochy",
           "Italië"),
    "LV": ("LVA", "Latvia", "Letonia", "Lettland", "Lettonie", "Letônia", "Letónia",
           "Lettonia", "Латвия", "Łotwa", "Letland", "Latvija"),
    "LT": ("LTU", "Lithuania", "Lituania", "Litauen", "Lituanie", "Lituânia", "Литва", "Litwa",
           "Litouwen", "Lietuva"),
    "LU": ("LUX", "Luxembourg", "Luxemburgo", "Luxemburg", "Lussemburgo", "Люксембург",
           "Luksemburg"),
    "MT": ("MLT", "Malta", "Malte", "Мальта"),
    "NL": ("NLD", "Netherlands", "The Netherlands", "Holland", "Países Bajos", "Holanda",
           "Niederlande", "Pays-Bas", "Países Baixos", "Paesi Bassi", "Olanda", "Нидерланды",
           "Голландия", "Holandia", "Nederland", "Nederländerna"),
    "PL": ("POL", "Poland", "Polonia", "Polen", "Pologne", "Polónia", "Polônia", "Польша",
           "Polska"),
    "PT": ("PRT", "Portugal", "Portogallo", "Португалия", "Portugalia"),
    "RO": ("ROU", "Romania", "Rumania", "Rumänien", "Roumanie", "Roménia", "Romênia",
           "Румыния", "Rumunia", "Roemenië"),
    "SK": ("SVK", "Slovakia", "Eslovaquia", "Slowakei", "Slovaquie", "Eslováquia",
           "Slovacchia", "Словакия", "Słowacja", "Slowakije", "Slovakien", "Slovensko"),
    "SI": ("SVN", "Slovenia", "Eslovenia", "Slowenien", "Slovénie", "Eslovênia", "Eslovénia",
           "Словения", "Słowenia", "Slovenië", "Slovenien", "Slovenija"),
    "ES": ("ESP", "Spain", "España", "Spanien", "Espagne", "Espanha", "Spagna", "Испания",
           "Hiszpania", "Spanje"),
    "SE": ("SWE", "Sweden", "Suecia", "Schweden", "Suède", "Suécia", "Svezia", "Швеция",
           "Szwecja", "Zweden", "Sverige"),
    "US": ("USA", "United States", "United States of America", "US", "America", "U.S.",
           "Estados Unidos", "EE.UU.", "EEUU", "Vereinigte Staaten", "États-Unis",
           "Estados Unidos da América", "EUA", "Stati Uniti", "США", "Соединённые Штаты",
           "Соединенные Штаты Америки", "Америка", "Stany Zjednoczone", "Verenigde Staten",
           "Förenta staterna"),
    "GB": ("GBR", "United Kingdom", "UK", "Great Britain", "Britain", "England", "Scotland",
           "Wales", "Northern Ireland", "Reino Unido", "Gran Bretaña", "Inglaterra",
           "Vereinigtes Königreich", "Großbritannien", "Schottland", "Royaume-Uni",
           "Grande-Bretagne", "Angleterre", "Écosse", "Grã-Bretanha", "Regno Unito",
           "Gran Bretagna", "Inghilterra", "Scozia", "Великобритания",
           "Соединённое Королевство", "Англия", "Шотландия", "Wielka Brytania", "Anglia",
           "Szkocja", "Verenigd Koninkrijk", "Groot-Brittannië", "Engeland", "Schotland",
           "Storbritannien", "Förenade kungariket", "Skottland"),
    "CA": ("CAN", "Canada", "Canadá", "Kanada", "Канада"),
    "CH": ("CHE", "Switzerland", "Suiza", "Schweiz", "Suisse", "Suíça", "Svizzera",
           "Швейцария", "Szwajcaria", "Zwitserland", "Helvetia"),
    "NO": ("NOR", "Norway", "Noruega", "Norwegen", "Norvège", "Norvegia", "Норвегия",
           "Norwegia", "Noorwegen", "Norge"),
    "IS": ("ISL", "Iceland", "Islandia", "Island", "Islande", "Islândia", "Islanda",
           "Исландия", "IJsland", "Ísland"),
    "LI": ("LIE", "Liechtenstein", "Лихтенштейн"),
    "MC": ("MCO", "Monaco", "Mónaco", "Монако"),
    "AD": ("AND", "Andorra", "Andorre", "Андорра"),
    "BR": ("BRA", "Brazil", "Brasil", "Brasilien", "Brésil", "Brasile", "Бразилия", "Brazylia",
           "Brazilië"),
    "RU": ("RUS", "Russia", "Rusia", "Russland", "Russie", "Rússia", "Россия", "Rosja",
           "Rusland", "Ryssland", "Russian Federation", "Российская Федерация", "РФ"),
    "UA": ("UKR", "Ukraine", "Ucrania", "Ucrânia", "Ucraina", "Украина", "Україна", "Ukraina",
           "Oekraïne"),
    "BY": ("BLR", "Belarus", "Bielorrusia", "Weißrussland", "Biélorussie", "Bielorrússia",
           "Bielorussia", "Беларусь", "Белоруссия", "Białoruś", "Wit-Rusland",
           "Vitryssland"),
    "TR": ("TUR", "Turkey", "Türkiye", "Turquía", "Türkei", "Turquie", "Turquia", "Turchia",
           "Турция", "Turcja", "Turkije", "Turkiet"),
    "AU": ("AUS", "Australia", "Australien", "Australie", "Austrália", "Австралия",
           "Australië"),
    "NZ": ("NZL", "New Zealand", "Nueva Zelanda", "Neuseeland", "Nouvelle-Zélande",
           "Nova Zelândia", "Nuova Zelanda", "Новая Зеландия", "Nowa Zelandia",
           "Nieuw-Zeeland", "Nya Zeeland"),
    "JP": ("JPN", "Japan", "Japón", "Japon", "Japão", "Giappone", "Япония", "Japonia"),
    "CN": ("CHN", "China", "Chine", "Cina", "Китай", "Chiny", "Kina"),
    "KR": ("KOR", "South Korea", "Korea", "Corea del Sur", "Südkorea", "Corée du Sud",
           "Coreia do Sul", "Corea del Sud", "Южная Корея", "Korea Południowa", "Zuid-Korea",
           "Sydkorea"),
    "IN": ("IND", "India", "Indien", "Inde", "Índia", "Индия", "Indie", "Indië"),
    "MX": ("MEX", "Mexico", "México", "Mexiko", "Mexique", "Messico", "Мексика", "Meksyk"),
    "AR": ("ARG", "Argentina", "Argentinien", "Argentine", "Аргентина", "Argentyna",
           "Argentinië"),
    "CL": ("CHL", "Chile", "Chili", "Cile", "Чили"),
    "CO": ("COL", "Colombia", "Kolumbien", "Colombie", "Colômbia", "Колумбия", "Kolumbia"),
    "PE": ("PER", "Peru", "Perú", "Pérou", "Перу"),
    "IL": ("ISR", "Israel", "Israël", "Израиль", "Izrael", "Israele"),
    "ZA": ("ZAF", "South Africa", "Sudáfrica", "Südafrika", "Afrique du Sud", "África do Sul",
           "Sudafrica", "ЮАР", "Южная Африка", "Republika Południowej Afryki", "RPA",
           "Zuid-Afrika", "Sydafrika"),
    "RS": ("SRB", "Serbia", "Serbien", "Serbie", "Sérvia", "Сербия", "Servië", "Srbija"),
    "KZ": ("KAZ", "Kazakhstan", "Kazajistán", "Kasachstan", "Cazaquistão", "Kazakistan",
           "Казахстан", "Kazachstan"),
    "SG": ("SGP", "Singapore", "Singapur", "Singapour", "Singapura", "Сингапур"),
    "AE": ("ARE", "United Arab Emirates", "UAE", "Emiratos Árabes Unidos",
           "Vereinigte Arabische Emirate", "Émirats arabes unis", "Emirados Árabes Unidos",
           "Emirati Arabi Uniti", "ОАЭ", "Объединённые Арабские Эмираты",
           "Zjednoczone Emiraty Arabskie", "Verenigde Arabische Emiraten",
           "Förenade Arabemiraten"),
}

# Leading articles dropped before a country lookup ("the Netherlands", "la Suisse").
COUNTRY_ARTICLES = frozenset({"the", "die", "der", "la", "le", "les", "l", "el", "los", "o",
                              "os", "a", "il", "lo", "gli"})

# ISO 639-1 → names (en/es/de/fr/pt/it/ru/pl/nl/sv/tr/uk, the endonym, common Russian and
# Ukrainian cases).
LANGUAGES: dict[str, tuple[str, ...]] = {
    "en": ("English", "inglés", "Englisch", "anglais", "inglês", "inglese", "английский",
           "английского", "английском", "angielski", "angielskiego", "Engels", "engelska",
           "İngilizce", "Ingilizce", "англійська", "англійську", "англійської", "англійською",
           "angličtina", "angličtinu", "angličtiny", "angličtině", "anglicky"),
    "de": ("German", "alemán", "Deutsch", "allemand", "alemão", "tedesco", "немецкий", "немецкого",
           "немецком", "niemiecki", "niemieckiego", "Duits", "tyska", "Almanca", "німецька",
           "німецьку", "німецької", "німецькою", "němčina", "němčinu", "němčiny", "němčině",
           "německy"),
    "es": ("Spanish", "español", "castellano", "Spanisch", "espagnol", "espanhol", "spagnolo",
           "испанский", "испанского", "испанском", "hiszpański", "hiszpańskiego", "Spaans",
           "spanska", "İspanyolca", "Ispanyolca", "іспанська", "іспанську", "španělština",
           "španělštinu", "španělsky"),
    "fr": ("French", "francés", "Französisch", "français", "francês", "francese", "французский",
           "французского", "французском", "francuski", "francuskiego", "Frans", "franska",
           "Fransızca", "Fransizca", "французька", "французьку", "francouzština",
           "francouzštinu", "francouzsky"),
    "pt": ("Portuguese", "portugués", "Portugiesisch", "portugais", "português", "portoghese",
           "португальский", "португальского", "portugalski", "Portugees", "portugisiska",
           "Portekizce", "португальська", "португальську", "portugalština", "portugalštinu"),
    "it": ("Italian", "italiano", "Italienisch", "italien", "итальянский", "итальянского", "włoski",
           "włoskiego", "Italiaans", "italienska", "İtalyanca", "Italyanca", "італійська",
           "італійську", "italština", "italštinu", "italsky"),
    "ru": ("Russian", "ruso", "Russisch", "russe", "russo", "русский", "русского", "русском",
           "rosyjski", "rosyjskiego", "ryska", "Rusça", "Rusca", "російська", "російську",
           "ruština", "ruštinu", "rusky"),
    "pl": ("Polish", "polaco", "Polnisch", "polonais", "polonês", "polacco", "польский",
           "польского", "polski", "polskiego", "Pools", "polska", "Lehçe", "Lehce", "польська",
           "польську", "polština", "polštinu"),
    "nl": ("Dutch", "neerlandés", "holandés", "Niederländisch", "Holländisch", "néerlandais",
           "holandês", "neerlandês", "olandese", "нидерландский", "голландский", "niderlandzki",
           "holenderski", "Nederlands", "nederländska", "Hollandaca", "Felemenkçe", "Felemenkce",
           "нідерландська", "нідерландську", "nizozemština", "nizozemštinu", "holandštinu"),
    "sv": ("Swedish", "sueco", "Schwedisch", "suédois", "svedese", "шведский", "szwedzki", "Zweeds",
           "svenska", "İsveççe", "Isvecce", "шведська", "шведську", "švédština", "švédštinu"),
    "uk": ("Ukrainian", "ucraniano", "Ukrainisch", "ukrainien", "ucraino", "украинский",
           "українська", "ukraiński", "Oekraïens", "ukrainska", "українську", "української",
           "українською", "украинского", "украинском", "Ukraynaca", "ukrajinština",
           "ukrajinštinu"),
    "tr": ("Turkish", "turco", "Türkisch", "turc", "турецкий", "turecki", "Turks", "turkiska",
           "Türkçe", "турецька", "турецьку", "турецкого", "turečtina", "turečtinu"),
    "ja": ("Japanese", "japonés", "Japanisch", "japonais", "japonês", "giapponese", "японский",
           "japoński", "Japans", "japanska", "日本語"),
    "zh": ("Chinese", "Mandarin", "chino", "Chinesisch", "chinois", "chinês", "cinese", "китайский",
           "chiński", "Chinees", "kinesiska", "中文"),
    "ko": ("Korean", "coreano", "Koreanisch", "coréen", "корейский", "koreański", "Koreaans",
           "koreanska"),
    "ar": ("Arabic", "árabe", "Arabisch", "arabe", "arabo", "арабский", "arabski", "arabiska"),
    "cs": ("Czech", "checo", "Tschechisch", "tchèque", "tcheco", "ceco", "чешский", "czeski",
           "Tsjechisch", "tjeckiska", "čeština", "češtinu", "češtiny", "češtině", "česky"),
    "da": ("Danish", "danés", "Dänisch", "danois", "dinamarquês", "danese", "датский", "duński",
           "Deens", "danska", "dansk"),
    "fi": ("Finnish", "finlandés", "Finnisch", "finnois", "finlandês", "finlandese", "финский",
           "fiński", "Fins", "finska", "suomi"),
    "no": ("Norwegian", "noruego", "Norwegisch", "norvégien", "norueguês", "norvegese",
           "норвежский", "norweski", "Noors", "norska", "norsk"),
    "el": ("Greek", "griego", "Griechisch", "grec", "grego", "greco", "греческий", "grecki",
           "Grieks", "grekiska"),
    "hu": ("Hungarian", "húngaro", "Ungarisch", "hongrois", "ungherese", "венгерский", "węgierski",
           "Hongaars", "ungerska", "magyar"),
    "ro": ("Romanian", "rumano", "Rumänisch", "roumain", "romeno", "rumeno", "румынский",
           "rumuński", "Roemeens", "rumänska"),
}

# What a customer asks to have "in" a language without naming it a language: "la web en
# alemán", "le site en allemand", "de site in het Duits".
LANGUAGE_SITE_NOUNS = frozenset(fold(w) for w in (
    "site", "website", "web", "sitio", "página", "seite", "webseite", "sito", "strona",
    "stronę", "сайт", "webbplats", "webbplatsen", "sajten", "app", "aplicación", "aplicativo",
    "applicazione", "aplikacja", "aplikację", "приложение", "застосунок", "uygulama",
    "stránky", "stránka", "stránku", "aplikace", "aplikaci"))

# ISO 639-2 codes people sometimes type instead of a name.
LANGUAGE_ALPHA3 = {"eng": "en", "deu": "de", "ger": "de", "spa": "es", "fra": "fr",
                   "fre": "fr", "por": "pt", "ita": "it", "rus": "ru", "pol": "pl", "nld": "nl",
                   "dut": "nl", "swe": "sv", "ukr": "uk", "tur": "tr", "jpn": "ja", "zho": "zh",
                   "chi": "zh"}

# Regional codes written before a postcode; and US, Canadian, Australian, Brazilian states.
STATE_CODES = frozenset((
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV "
    "NH NJ NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY "
    "AB BC MB NB NL NS NT NU ON PE QC SK YT NSW VIC QLD TAS ACT "
    "AC AM AP BA CE ES GO MA MG MS MT PB PR PI RJ RN RS RO RR SE SP TO").split())
STATE_NAMES = frozenset(fold(name) for name in (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa",
    "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan",
    "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire",
    "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio",
    "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota",
    "Tennessee", "Texas", "Utah", "Vermont", "Virginia", "Washington", "West Virginia",
    "Wisconsin", "Wyoming", "Ontario", "Quebec", "British Columbia", "Alberta",
    "New South Wales", "Victoria", "Queensland"))

# --- addresses -----------------------------------------------------------------------
ADDRESS_NOUN = (r"address(?:es)?|addres|addr\b|adress(?:e|en)?|adres(?:se)?|adresa"
                r"|\w+adress(?:e|en)?|\w*anschrift(?:en)?|direcci[oó]n|domicilio|endere[cç]o|morada|indirizzo"
                r"|адрес(?:а|е|у|ом)?")
# Words right before or after an address noun that make it an e-mail/web address.
ADDRESS_NOT_POSTAL_BEFORE = r"(?:e-?mail|mail|e-?post|courriel|ip|web|url|website)[\s-]*$"
ADDRESS_NOT_POSTAL_AFTER = (r"^\s*(?:de\s+|d'|da\s+|do\s+)?(?:e-?mail|mail|correo|courriel"
                            r"|электронн|почт|ip\b|web\b)")
# Phrases that introduce an address without the noun ("I moved to …", "ship it to …").
ADDRESS_CUES = (
    r"\b(?:moved?|moving|relocated?)\s+to\b|\b(?:ship|deliver|send|post|mail)(?:\s+\w+){0,3}?"
    r"\s+to\b|\bumgezogen(?:\s+nach)?\b|\bziehe?\s+(?:\w+\s+){0,3}?nach\b|\bliefern\s+(?:\w+\s+)"
    r"{0,2}?an\b|\bme\s+mud[eé]\s+a\b|\benv[ií](?:e|en|ar)(?:lo|la|los)?\s+a\b"
    r"|\bпереех\w*\s+(?:в|на)\b|\bдоставьте\s+(?:на|в)\b|\bmudei(?:-me)?\s+para\b"
    r"|\benvi(?:ar|em?)\s+para\b|\bd[ée]m[ée]nag[ée]\s+(?:au|à|a)\b|\blivrer\s+(?:à|au)\b"
    r"|\bprzeprowadzi\w*\s+si[eę]\s+(?:do|na)\b|\bflyttat\s+till\b|\bverhuisd\s+naar\b"
    r"|\btrasferit[oa]\s+(?:a|in)\b")
BILLING = (r"\bbilling\b|\bbill[\s-]to\b|\binvoic(?:e|ing)\s+address|\baddress\s+(?:for|on)\s+"
           r"(?:the\s+)?invoices?|rechnungs(?:adresse|anschrift)|\bfacturaci[oó]n\b|\bfiscal\b"
           r"|для\s+сч[её]т\w*|плат[её]жн\w*\s+адрес|адрес\w*\s+плательщик\w*|\bcobran[cç]a\b"
           r"|\bfatura[cç][aã]o\b|\bfaturamento\b|\bfacturation\b|\bfatturazione\b"
           r"|rozliczeniow\w*|do\s+faktur\w*|factuuradres|fakturaadress\w*")
SHIPPING = (r"\bshipping\b|\bdelivery\b|\bliefer\w*|\bversand\w*|\benv[ií]o\b|\bentrega\b"
            r"|доставк\w*|\blivraison\b|\bspedizione\b|\bconsegna\b|\bwysy[lł]k\w*|\bdostaw\w*"
            r"|\bbezorg\w*|\bleverans\w*")
# Words skipped between the cue and the address ("address is now: …", "dirección de envío es").
ADDRESS_CONNECTORS = frozenset(fold(w) for w in (
    "is", "to", "now", "will", "be", "should", "has", "been", "changed", "change", "updated",
    "update", "set", "the", "following", "as", "follows", "new", "my", "it's", "its", "please",
    "lautet", "ist", "jetzt", "nun", "neu", "neue", "auf", "nach", "zu", "wie", "folgt", "ab",
    "sofort", "es", "nuevo", "novo", "nouveau", "nieuw", "ahora", "a", "al", "por", "será",
    "sigue", "siguiente", "nueva", "mi", "de",
    "envío", "entrega", "facturación", "e", "é", "agora", "para", "passa", "ser", "nova", "meu",
    "minha", "cobrança", "faturação", "faturamento", "est", "désormais", "maintenant", "à",
    "au", "par", "ma", "mon", "nouvelle", "suivante", "livraison", "facturation", "è", "ora",
    "mio", "nuovo", "consegna", "spedizione", "fatturazione", "jest", "to", "teraz", "na",
    "mój", "nowy", "dostawy", "wysyłki", "är", "nu", "till", "min", "nya", "ny", "naar",
    "mijn", "nieuwe", "wordt", "это", "теперь", "на", "будет", "мой", "новый", "следующий",
    "доставки", "для", "счетов", "счета", "shipping", "billing", "delivery"))
# A segment that starts with one of these ends the address (sign-offs, the next request).
ADDRESS_STOP_WORDS = frozenset(fold(w) for w in (
    "thanks", "thank", "thx", "regards", "cheers", "best", "kind", "sincerely", "please",
    "pls", "phone", "tel", "call", "danke", "vielen", "bitte", "grüße", "gruß", "lg", "mfg",
    "gracias", "saludos", "un", "por", "спасибо", "пожалуйста", "с", "obrigado", "obrigada",
    "cumprimentos", "merci", "cordialement", "grazie", "saluti", "dziękuję", "dzięki",
    "pozdrawiam", "tack", "hälsningar", "bedankt", "groeten", "mvg", "and", "but", "also"))
# Abbreviations whose dot does not end a sentence ("ul. Długa 5", "St. Mary's Rd").
ADDRESS_ABBREVIATIONS = frozenset(fold(w) for w in (
    "st", "str", "ave", "av", "avda", "blvd", "bd", "rd", "dr", "ln", "ct", "pl", "al", "ul",
    "os", "pkwy", "hwy", "sq", "apt", "ste", "fl", "no", "nr", "nº", "bldg", "dpto", "dto",
    "esq", "izq", "ctra", "pza", "plz", "pr", "bis", "app", "bât", "rte", "ch", "imp", "pç",
    "lgo", "trav", "tv", "rod", "mt", "ft", "co", "mr", "mrs", "ms", "sr", "sra", "ул", "пр",
    "пер", "наб", "ш", "корп", "стр", "пл", "бул", "обл", "пос", "просп", "мкр", "кв", "ж"))
# Street words: a segment holding one is a street line even without a house number.
STREET_WORDS = (
    r"\b(?:street|st|road|rd|avenue|ave|av|avda|avenida|lane|ln|drive|dr|way|court|ct|place|"
    r"square|sq|boulevard|blvd|bd|highway|hwy|parkway|pkwy|terrace|crescent|close|"
    r"calle|c/|paseo|plaza|camino|carrer|rua|travessa|largo|praça|estrada|rue|chemin|quai|"
    r"allée|impasse|via|viale|corso|piazza|ulica|ul|aleja|al|plac|pl|osiedle|os|"
    r"улица|ул|проспект|пр|пр-т|переулок|пер|шоссе|набережная|наб|бульвар|площадь|"
    r"plein|laan|straat|gracht|kade|gatan|vägen|gata|vei|vej|gade)\b\.?"
    r"|(?:straße|strasse|str\.|weg|allee|platz|gasse|ring|damm|ufer|chaussee|markt|steig|"
    r"straat|laan|gracht|gatan|vägen|gränd|torget|gade|vej|veien|gata)\b")
CITY_PREFIXES = r"^(?:г\.|гор\.|город)\s*"
# Words that lead into an address inside one segment: "it should be …", "I live at …".
ADDRESS_LEAD_IN = r"(?:^|\s)(?:is|be|to|at|auf|an|nach|es|a|é|est|à|au|è|är|na|на|в)\s+"
# "Main Street 5 in Berlin": the city after the house number.
ADDRESS_IN_CITY = r"^(.*\d\w*)\s+(?:in|à|en|em|в|w|i)\s+(\S.*)$"

# --- amounts --------------------------------------------------------------------------
# Currency markers → ISO code. Every currency a customer names is kept (the refund
# handler asks about the ones the shop does not take); "¥" is read as JPY.
CURRENCY_SYMBOLS: dict[str, str] = {
    "US$": "USD", "R$": "BRL", "$": "USD", "€": "EUR", "£": "GBP", "₽": "RUB", "C$": "CAD",
    "CA$": "CAD", "A$": "AUD", "AU$": "AUD", "NZ$": "NZD", "HK$": "HKD", "MX$": "MXN",
    "¥": "JPY", "₹": "INR", "₴": "UAH", "₺": "TRY", "₩": "KRW"}
CURRENCY_CODES: dict[str, str] = {
    "usd": "USD", "eur": "EUR", "gbp": "GBP", "rub": "RUB", "rur": "RUB", "brl": "BRL",
    "pln": "PLN", "sek": "SEK", "chf": "CHF", "cad": "CAD", "aud": "AUD", "jpy": "JPY",
    "cny": "CNY", "nok": "NOK", "dkk": "DKK", "czk": "CZK", "huf": "HUF", "uah": "UAH",
    "inr": "INR", "mxn": "MXN"}
# Currency words after a number ("15 euros", "1500 руб.", "50 zł"): regex → ISO code.
CURRENCY_WORDS: dict[str, str] = {
    r"dollars?|d[oó]lar(?:es)?|bucks?|доллар(?:ов|а|ы)?|долл\.?|dollari|dolar(?:ów|y|a)?"
    r"|долар(?:ів|а|и)?": "USD",
    r"euros?|евро|євро|eurô": "EUR",
    r"pounds?(?:\s+sterling)?(?!\s+of\b)|quid|sterling|libras?(?:\s+esterlinas?)?|livres?\s+sterling"
    r"|pfund|фунт(?:ов|а|ы)?(?:\s+стерлингов)?|funt(?:ów|y|a)?|sterlin[ae]": "GBP",
    r"руб(?:лей|ля|ль|\.)?|р\.?|rubles?|roubles?|rublos?|rubli|rubel|rubl[ei]|rubla": "RUB",
    r"reais|reales": "BRL",
    r"zł(?:otych|ote|oty)?|zl|zlot(?:y|ys|ych)|złotys": "PLN",
    r"kr\.?|kronor|krona|kronen|:-": "SEK",
    r"francs?\s+suisses?|swiss\s+francs?|franken|franchi\s+svizzeri": "CHF",
    r"tl|(?:t[üu]rk\s+)?lira(?:s[ıi])?|liras[ıi]": "TRY",
    r"грн\.?|гривень|гривні|гривня|гривню|гривна|гривен|гривны|hryvni?as?": "UAH",
    r"k[čc]|korun[auy]?|korunách|korunach|czech\s+korun(?:a|as)?": "CZK",
}
# Words for fractions of a unit: "50 cents" names money, in no currency we can be sure of.
CENT_WORDS = (r"cents?|pence|penny|pennies|centavos?|c[eé]ntimos?|centimes?|centesimi|копе[ейк]\w*"
              r"|grosz\w*|öre|eurocent\w*|cts?")
# Above this many major units the amount is treated as a typo (about $100,000 each).
AMOUNT_LIMITS = {"USD": 100_000, "EUR": 100_000, "GBP": 100_000, "BRL": 500_000,
                 "PLN": 400_000, "SEK": 1_000_000, "RUB": 10_000_000, "CHF": 100_000,
                 "CAD": 150_000, "AUD": 150_000, "NZD": 170_000, "HKD": 800_000,
                 "MXN": 2_000_000, "JPY": 15_000_000, "CNY": 700_000, "INR": 8_000_000,
                 "UAH": 4_000_000, "TRY": 3_000_000, "KRW": 130_000_000, "NOK": 1_000_000,
                 "DKK": 700_000, "CZK": 2_500_000, "HUF": 40_000_000}
MINUS_WORDS = r"(?<![^\W\d_])(?:minus|menos|минус|moins|meno|negative|negativ[eo]s?)\s*$"
# Words after which a bare decimal ("refund 15.50") is read as money.
MONEY_CUES = (
    r"refund(?:ed)?|charged?|paid|pay|costs?|price|total|amount|sum|reembols(?:o|ar)|cobrad[oa]"
    r"|cobraron|pagu[eé]|pagad[oa]|importe|monto|erstattung|erstatten|bezahlt|berechnet|betrag"
    r"|summe|preis|возврат|вернуть|верните|списали|оплатил\w*|сумм[ау]|стоимость"
    r"|remboursement|rembourser|pay[ée]|factur[ée]|montant|prix|estorno|paguei|valor|preço"
    r"|rimborso|pagato|importo|zwrot|zapłaci\w*|kwota|terugbetaling|betaald|bedrag"
    r"|återbetalning|betalade|belopp|iade|tutar\w*|ödedim|ödeme\w*|повернення|поверніть"
    r"|повернути|списали|сплатив\w*|оплатив\w*|сум[ау]|vra[tť]\w*|vr[aá]cen\w*|zaplatil\w*"
    r"|[čc][aá]stk\w*|cena|cenu")
# Words allowed between a money cue and its number: "refund me 20.00", "Erstattung von 15,50".
MONEY_FILLERS = (
    r"of|for|was|is|de|von|du|des|di|da|do|em|van|på|в\s+размере|в|me|us|just|only|back"
    r"|exactly|about|around|approximately|approx|roughly|mir|uns|sie|nur|bitte|genau|moi"
    r"|nous|seulement|juste|nos|solo|sólo|apenas|мне|нам|только|mi|mnie|tylko|mig|bara"
    r"|the|a|an|die|den|einen|la|le|el|lo|il|un|una|une|um|uma|het|een")
# After a bare number, words that make it a count or a measure, not money ("paid 2 times").
NOT_MONEY_AFTER = (
    r"kg|g|km|cm|mm|m|ml|l|lbs?|oz|items?|pcs|pieces?|units?|times|x|days?|weeks?|months?"
    r"|years?|hours?|minutes?|orders?|mal|stück|stk|tage?n?|wochen|veces|d[ií]as|semanas"
    r"|fois|jours|vezes|dias|unidades|раз[а]?|дн(?:я|ей)|штук\w*|szt|razy|dni|gånger|dagar"
    r"|keer|dagen|volte|giorni|kez|kere|defa|gün|adet|раз[іи]в|днів|дні|ks|kus\w*|kr[aá]t"
    r"|dn[ůui]|dny|t[ýy]dn\w*|m[ěe]s[íi]c\w*")
# English number words, read into amounts ("fifteen dollars"); see NUMBER_WORDS_OTHER.
NUMBER_WORDS_EN: dict[str, int] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1_000, "million": 1_000_000}
# Number words of the other languages (es, de, fr, pt, it, ru, pl, nl, sv): recognised so
# that an amount written in them is asked about, never read as "no amount". Words that
# are also articles ("ein", "un", "una", "um", "en", "een") are left out; the ones that
# are also common words elsewhere (`AMBIGUOUS_NUMBER_WORDS`) count only right before a
# currency ("due euro"), not after a money word ("the amount due").
NUMBER_WORDS_OTHER = (
    r"dos|tres|cuatro|cinco|seis|siete|ocho|nueve|diez|once|doce|trece|catorce|quince"
    r"|dieci\w+|veint\w+|treinta|cuarenta|cincuenta|sesenta|setenta|ochenta|noventa|cien\w*"
    r"|doscientos|trescientos|quinientos|mil"
    r"|zwei|drei|vier|fünf|funf|sechs|sieben|acht|neun|zehn|elf|zwölf|zwolf"
    r"|(?:drei|vier|fünf|sech|sieb|acht|neun)zehn"
    r"|(?:\w+und)?(?:zwanzig|dreißig|dreissig|vierzig|fünfzig|funfzig|sechzig|siebzig|achtzig"
    r"|neunzig)|\w*hundert\w*|\w*tausend\w*"
    r"|deux|trois|quatre|cinq|sept|huit|neuf|dix|onze|douze|treize|quatorze|quinze|seize"
    r"|vingt\w*|trente|quarante|cinquante|soixante\w*|cent"
    r"|três|quatro|sete|oito|nove|dez|doze|treze|dezesseis|dezasseis|dezessete"
    r"|dezassete|dezoito|dezenove|dezanove|vinte|trinta|quarenta|cinquenta|cem|cento|duzentos"
    r"|due|tre|quattro|cinque|sei|sette|otto|dieci|undici|dodici|tredici|quindici|venti\w*"
    r"|trenta|quaranta|cinquanta|mille"
    r"|два|две|три|четыре|пять|шесть|семь|восемь|девять|десять|\w+надцать|двадцать|тридцать"
    r"|сорок|пятьдесят|шестьдесят|семьдесят|восемьдесят|девяносто|сто|двести|триста|пятьсот"
    r"|тысяч\w*"
    r"|dwa|dwie|trzy|cztery|pięć|sześć|siedem|osiem|dziewięć|dziesięć|\w+naście|dwadzieścia"
    r"|trzydzieści|czterdzieści|pięćdziesiąt|dwieście|tysiąc\w*"
    r"|twee|drie|vier|vijf|zes|zeven|negen|tien|twaalf|dertien|veertien|vijftien|zestien"
    r"|zeventien|achttien|negentien|twintig|dertig|veertig|vijftig|honderd|duizend"
    r"|två|fyra|fem|sex|sju|åtta|nio|tio|elva|tolv|tretton|fjorton|femton|sexton|sjutton"
    r"|arton|nitton|tjugo\w*|trettio|fyrtio|femtio|hundra|tusen"
    r"|iki|üç|dört|beş|altı|yedi|sekiz|dokuz|yirmi|otuz|kırk|elli|altmış|yetmiş|seksen"
    r"|doksan|yüz|bin"
    r"|дві|чотири|п['’]ять|шість|сім|вісім|дев['’]ять|десять|\w+надцять|двадцять|тридцять"
    r"|п['’]ятдесят|шістдесят|сімдесят|вісімдесят|дев['’]яносто|двісті|п['’]ятсот|тисяч\w*")
AMBIGUOUS_NUMBER_WORDS = frozenset({
    "dos", "once", "mil", "elf", "acht", "sept", "cent", "due", "tre", "sei", "otto", "sex",
    "fem", "tio", "tien", "zes", "nove", "sete", "dez", "cem", "vier", "mille", "sto", "bin",
    "iki", "elli", "сім"})
# Vague quantities: "a few dollars", "refund half", "die Hälfte" — money named without a number.
QUANTITY_WORDS = (
    r"few|some|several|couple|half|part|portion|bit|little|hälfte|halbe\w*|mitad|moitié"
    r"|metade|metà|половин\w*|часть|połow\w*|część|helft|hälften|teil\w*|parte|partie"
    r"|yarı\w*|частин\w*|polovin\w*|p[ůu]l|[čc][áa]st\w*")
# Halves, wherever they stand: "reembolsen la mitad", "de helft terug" name money without
# a number even with no money word before them, so the refund handler asks.
HALF_WORDS = (r"half|hälfte|halbe[nrs]?|mitad|moitié|metade|metà|половин\w*|połow\w*|helft"
              r"|hälften|yarısı\w*|polovin\w*|půl")
# The customer asks for the whole amount ("full refund", "in full", "den vollen Betrag").
FULL_REFUND = (
    r"\bin\s+full\b|\bfull(?:y)?\s+(?:refund|amount|price|sum|payment|cost|money)\b"
    r"|\brefund\s+(?:it\s+|them\s+)?(?:all|fully|completely|entirely)\b|\ball\s+of\s+it\b"
    r"|\b(?:whole|entire|complete|total)\s+(?:refund|amount|order|price|sum|thing|cost)\b"
    r"|\beverything\b|\bvoll(?:en|er|es|ständig\w*)?\s+(?:betrag|erstattung|preis|summe)\b"
    r"|\bvollständig\b|\bgesamt(?:en|e)?\s+(?:betrag|preis|summe)\b|\bkomplett\b"
    r"|\breembolso\s+(?:total|completo|íntegro)\b|\btodo\s+el\s+(?:dinero|importe)\b"
    r"|\bremboursement\s+(?:total|intégral|complet)\b|\bintégralement\b|\bvalor\s+total\b"
    r"|\breembolso\s+(?:integral|total)\b|\brimborso\s+(?:totale|completo|integrale)\b"
    r"|полностью|всю\s+сумму|\bcał(?:ość|kowity|ą\s+kwotę)\b|\bvolledig\w*\b"
    r"|\bhela\s+beloppet\b|\btamamını\b|\btam\s+iade\b|повністю|всю\s+суму|повну\s+суму"
    r"|\bcelou\s+[čc][áa]stku\b|\bv\s+pln[ée]\s+v[ýy][šs]i\b|\bv[šs]echno\b")

# The customer says they want no refund ("I don't want a refund, just fix the address"):
# a wish verb that is negated, or "instead of a refund". A refund not yet received ("no
# refund has arrived", "keine Erstattung erhalten") is no refusal, so "no refund" alone
# is not one either.
REFUND_DECLINED = (
    r"\b(?:do\s+not|don['’]?t|does\s+not|doesn['’]?t|will\s+not|won['’]?t|never|no\s+longer)"
    r"\s+(?:really\s+)?(?:want|need|wish\s+for|require|expect|ask\s+for|request)"
    r"\s+(?:a\s+|any\s+|the\s+|my\s+|your\s+)?(?:refund|reimbursement|money\s+back)\b"
    r"|\bnot\s+(?:asking|looking)\s+for\s+(?:a\s+|any\s+)?(?:refund|reimbursement|money)\b"
    r"|\b(?:instead\s+of|rather\s+than)\s+(?:a\s+)?(?:refund|reimbursement)\b"
    r"|\b(?:möchte|will|wünsche|brauche|benötige)\s+(?:ich\s+)?(?:\w+\s+)?kein(?:e|en)?"
    r"\s+(?:rück)?(?:erstattung|geld\s+zurück|gutschrift)"
    r"|\b(?:an)?statt\s+(?:einer\s+)?(?:rück)?erstattung"
    r"|\bne\s+(?:veux|voulons|souhaite|souhaitons|désire|demande)\s+pas\s+(?:de\s+|d['’]\s*|un\s+|le\s+)?"
    r"(?:être\s+)?rembours|\bpas\s+besoin\s+d['’e]\s*(?:un\s+)?rembours"
    r"|\bau\s+lieu\s+d['’e]\s*(?:un\s+|être\s+)?rembours"
    r"|\bno\s+(?:quiero|queremos|deseo|necesito|pido|busco)\s+(?:un\s+|el\s+|ningún\s+|ningun\s+)?"
    r"(?:reembolso|que\s+me\s+reembolsen)|\ben\s+(?:lugar|vez)\s+de\s+(?:un\s+)?reembolso"
    r"|\bnon\s+(?:voglio|vogliamo|desidero|chiedo|ho\s+bisogno\s+di)\s+(?:un\s+|il\s+|alcun\s+)?"
    r"rimbors|\binvece\s+(?:di\s+|del\s+)(?:un\s+)?rimbors"
    r"|\b(?:wil|willen|hoef|wens)\s+(?:ik\s+|we\s+)?geen\s+(?:terugbetaling|restitutie|geld\s+terug)"
    r"|\bin\s+plaats\s+van\s+(?:een\s+)?(?:terugbetaling|restitutie)"
    r"|\bnie\s+(?:chcę|chce|chcemy|potrzebuję|potrzebuje|oczekuję)\s+(?:\w+\s+)?zwrot"
    r"|\bzamiast\s+zwrotu"
    r"|\bnão\s+(?:quero|queremos|preciso\s+de|desejo)\s+(?:um\s+|o\s+)?reembolso"
    r"|\bem\s+vez\s+de\s+(?:um\s+)?reembolso"
    r"|\bvill\s+inte\s+ha\s+(?:någon\s+)?återbetalning|\b(?:vill|behöver)\s+ingen\s+återbetalning"
    r"|\bnechc(?:i|eme)\s+(?:\w+\s+)?(?:vr[áa]cen[íi]|refundac\w*|pen[íi]ze\s+zp[ěe]t)"
    r"|\bm[íi]sto\s+vr[áa]cen[íi]")

# --- preferences ----------------------------------------------------------------------
# (setting, inverted, regex): "inverted" topics ask for the opposite of the setting
# (wanting paper invoices means paperless_billing off).
PREFERENCE_TOPICS: tuple[tuple[str, bool, str], ...] = (
    ("marketing_emails", False,
     r"\b(?:marketing(?:[\s-]*e?-?mails?|ow\w*)?|promo(?:tion(?:al|s)?|s)?|news?\s?lett?er\w*"
     r"|mailing\s?lists?|(?:special\s+)?offers|deals|advertising|adverts?|ads|spam\w*"
     r"|werbe\w*|werbung|angebote|bolet[ií]n(?:es)?|publicidad|promociones|ofertas"
     r"|correos?\s+(?:promocionales|publicitarios)|рассыл\w*|реклам\w*|промо\w*|акци[ийя]\w*"
     r"|спам\w*|promocionais|promo[cç][oõ]es|propaganda|publicidade|boletim|lettres?\s+d'information"
     r"|promotionnel\w*|publicit\w*|(?:des|de|les|la|vos|aux)\s+pubs?|promozion\w*|pubblicit\w*|offerte|biuletyn\w*"
     r"|reklam\w*|promocj\w*|oferty|mailing\w*|nieuwsbrie\w*|reclame\w*|aanbiedingen"
     r"|nyhetsbrev\w*|erbjudanden|utskick|marknadsföring\w*|marknadsforing\w*"
     r"|e-?b[üu]lten\w*|b[üu]lten\w*|pazarlama\w*|kampanya\w*|розсил\w*|marketingov\w*"
     r"|obchodn[íi]\w*\s+sd[ěe]len[íi]\w*|propaga[čc]n[íi]\w*|nab[íi]dk\w*|zpravodaj\w*)\b"),
    ("sms_notifications", False,
     r"\b(?:sms\w*|text\s+messages?|text(?:s|ing)|text\s+(?:alerts|notifications)|смс\w*"
     r"|mensaje?s?\s+de\s+texto|mensagens?\s+de\s+texto|textos|messages?\s+texte"
     r"|textov[ée]\s+zpr[áa]v\w*)\b"),
    ("paperless_billing", False,
     r"paperless|paper-?free|\be-?bill(?:s|ing)?\b|\be-?invoic\w*|electronic\s+(?:invoices?|bills?"
     r"|billing|statements?)|digital\s+(?:invoices?|bills?|statements?)|(?:pdf|online)\s+(?:invoices?"
     r"|bills?)|(?:invoices?|bills?|statements?)\s+(?:by|via|per)\s+e-?mail|papierlos\w*"
     r"|\be-?rechnung\w*|elektronische\w*\s+rechnung\w*|online-?rechnung\w*|digitale\w*\s+rechnung\w*"
     r"|rechnung\w*\s+per\s+e-?mail|factura\w*\s+(?:electr[oó]nica|digital)\w*|facturaci[oó]n\s+"
     r"electr[oó]nica|sin\s+papel|электронн\w*\s+(?:сч[её]т|квитанц|чек)\w*|без\s+бумаг\w*"
     r"|безбумажн\w*|fatura\w*\s+(?:eletr[oóô]nica|electr[oó]nica|digital)\w*|sem\s+papel"
     r"|factures?\s+(?:[eé]lectroniques?|d[eé]mat[eé]rialis[eé]es?|num[eé]riques?)|z[eé]ro\s+papier"
     r"|sans\s+papier|fattur\w*\s+elettronic\w*|senza\s+carta|\be-?faktur\w*|faktur\w*\s+"
     r"elektroniczn\w*|bez\s+papieru|papierloo?s|\be-?factu\w*|digitale\s+factu\w*|pappersfri\w*"
     r"|rechnung\w*\s+(?:\w+\s+){0,3}?per\s+e-?mail|factur\w*\s+(?:\w+\s+){0,2}?par\s+"
     r"(?:e-?mail|courriel|mail)|fattur\w*\s+(?:\w+\s+){0,2}?(?:via|per)\s+e-?mail"
     r"|factu\w*\s+(?:\w+\s+){0,2}?per\s+e-?mail|faktur\w*\s+(?:\w+\s+){0,2}?(?:via|per|på)"
     r"\s+(?:e-?post|mejl|mail)|\be-fatura\w*|\befatura\w*|fatura\w*\s+(?:\w+\s+){0,3}?e-?posta\s+ile"
     r"|електронн\w*\s+рахун\w*|elektronick\w*\s+(?:faktur\w*|vy[úu][čc]tov[áa]n[íi]\w*)"
     r"|faktur\w*\s+(?:\w+\s+){0,2}?(?:e-?mailem|na\s+e-?mail|do\s+e-?mailu)|bez\s+pap[íi]ru"),
    ("paperless_billing", True,
     r"\bpaper\s+(?:invoices?|bills?|billing|statements?|copies)|printed\s+(?:invoices?|bills?)"
     r"|(?:invoices?|bills?|statements?)\s+(?:by|via|through\s+the)\s+(?:post|mail|snail\s*mail)"
     r"|\bon\s+paper\b|papierrechnung\w*|rechnung\w*\s+(?:auf|in|per)\s+(?:papier|post)"
     r"|factura\w*\s+(?:en\s+papel|impresa\w*|f[ií]sica\w*)|\bбумажн\w*|fatura\w*\s+(?:em\s+papel"
     r"|impressa\w*|f[ií]sica\w*)|factures?\s+(?:papier|en\s+papier|par\s+courrier|par\s+la\s+poste)"
     r"|fattur\w*\s+cartace\w*|faktur\w*\s+papierow\w*|papierow\w*\s+faktur\w*|papieren\s+factu\w*"
     r"|factuur\s+op\s+papier|pappersfaktur\w*|\b(?:auf|in)\s+papier(?:form)?\b"
     r"|\b(?:sur|en)\s+papier\b|\bsu\s+carta\b|\bop\s+papier\b|papier\w*\s+rekening\w*"
     r"|rekening\w*\s+(?:per\s+post|op\s+papier)|\bpå\s+papper\b|k[aâ]ğ[ıi]t\s+fatura\w*"
     r"|k[aâ]ğ[ıi]t\s+olarak|kag[ıi]t\s+fatura\w*|паперов\w*|pap[íi]rov\w*\s+faktur\w*"
     r"|faktur\w*\s+(?:\w+\s+){0,2}?po[šs]tou|ti[šs]t[ěe]n\w*\s+faktur\w*"
     r"|v\s+pap[íi]rov[ée]\s+podob[ěe]"),
)
# Cues: (regex, value, strong). value None: a "receive" verb, meaningful only when negated.
PREFERENCE_CUES: tuple[tuple[str, str | None, bool], ...] = (
    (r"\b(?:turn|switch|toggle|put|flip)(?:\s+(?!off\b|on\b)\S+){0,4}?\s+on\b", "on", True),
    (r"\b(?:turn|switch|toggle|shut|flip)(?:\s+(?!off\b|on\b)\S+){0,4}?\s+off\b", "off", True),
    (r"\b(?:on|an|ein|aan)(?:\s+(?:please|pls|bitte|aub|graag))?\s*[.!]*\s*(?:$|(?=\s+en\s))",
     "on", True),
    (r"\b(?:off|aus|uit)(?:\s+(?:please|pls|bitte|aub|graag))?\s*[.!]*\s*(?:$|(?=\s+en\s))",
     "off", True),
    (r"\b(?:enable|activate|re-?enable|reactivate|re-?subscribe|subscribe|opt[\s-]?in(?:to)?"
     r"|sign\s+(?:me\s+)?(?:back\s+)?up|start|resume|switch\s+to|einschalten|anschalten"
     r"|aktivieren|abonnieren|anmelden|activ[ae]r?|activen|habilit[ae]r?|suscrib\w*|suscr[ií]b\w*"
     r"|encender|enciend\w*|ativ(?:ar|e|em|a)|ligar|ligue|assinar|inscrever|subscrever|activer|activez"
     r"|r[ée]activer|abonner|abonnez|inscrire|attivare|attiva|attivate|iscriver\w*|iscrivimi"
     r"|abilitare|aanzetten|inschakelen|activeren|aktivera|prenumerera|sl[åa]\s+p[åa]|sätt\s+på"
     r"|act[ií]v(?:e|en|a|ar)(?:me|nos|lo|la|los|las)?|inscrev\w*|iscriv\w*|lägg\s+till|anmäl\w*"
     r"|pass(?:ez|er)(?:-moi|-nous)?\s+(?:à|a|au|en)|p[áa]s(?:e|en)(?:me|nos)?\s+a"
     r"|mud(?:e|em)(?:-me)?\s+para|pass(?:ate|a)(?:mi|ci)?\s+a(?:lla|l)?|zet\s+(?:me|mij|ons)\s+op"
     r"|byt\s+till|meld\w*(?:\s+\S+){0,5}?\s+(?:an|aan)|schrijf(?:\s+\S+){0,4}?\s+in"
     r"|(?:zet|schakel)(?:\s+\S+){0,4}?\s+(?:aan|in)|abone\s+ol\w*|abone\s+ed\w*|a[çc][ıi]n\w*"
     r"|ge[çc]ir\w*|ge[çc]in\w*|benachrichtigt\s+werden)(?![^\W\d_])",
     "on", True),
    (r"(?<![^\W\d_])(?:включ|подключ|активир|подпиш|возобнов|włącz|wlacz|zapisz|aktywuj|subskryb"
     r"|перевед|переключ\w*\s+на|увімкн|ввімкн|підключ|підпиш|активуй|przełącz|przelacz"
     r"|zapn|zapnout|aktivuj|aktivovat|p[řr]ihl[aá][sš]|obnovt|p[řr]epn\w*(?:\s+m[ěe])?\s+na|p[řr]ej[íi]t\s+na|p[řr]ejd[ěe]te\s+na|p[řr]eve[ďd]te)"
     r"\w*", "on", True),
    (r"\b(?:disable|deactivate|stop\w*|unsubscribe\w*|opt(?:\s+me)?[\s-]?out|remove\s+me|take\s+me\s+off"
     r"|cancel\w*|block|halt|cease|no\s+more|no\s+longer|enough|ausschalten|abschalten"
     r"|deaktivieren|abbestellen|abmelden|stoppen|beenden|kündigen|desactiv\w*|cancel[ae]r?"
     r"|dar(?:se|me)?\s+de\s+baja|d[eé]me\s+de\s+baja|detener|dejar\s+de|parar|para\s+de|apag\w*"
     r"|desuscrib\w*|no\s+m[aá]s|ya\s+no|desativ\w*|deslig\w*|pare|chega\s+de|descadastr\w*"
     r"|sair\s+d[ao]|d[ée]sactiv\w*|arr[eê]t\w*|d[ée]sabonn\w*|d[ée]sinscri\w*|ne\s+plus"
     r"|plus\s+jamais|disattiv\w*|disiscriv\w*|annulla\w*|basta|smett\w*|rezygnuj\w*|zrezygnowa\w*"
     r"|anuluj\w*|dezaktywuj\w*|uitzetten|uitschakelen|afmelden|uitschrijven|avaktivera"
     r"|st[äa]ng\s+av|sluta|avsluta|avregistrera|avprenumerera|unsub\w*|abbestel\w*"
     r"|dej(?:e|en|a|ar)\s+de|d[eé]nme\s+de\s+baja|quit(?:en|ar)(?:me|nos)?|qu[ií]tenme|elimin(?:en|ar)"
     r"|parem\s+de|parar\s+de|togli\w*|rimuov\w*|(?<!\bne\s)(?<!n['’])(?:veux|veut|voulons|voulez)\s+plus\s+"
     r"(?:recevoir|avoir)|(?:meld|bestell)\w*(?:\s+\S+){0,5}?\s+(?:ab|af)"
     r"|schrijf(?:\s+\S+){0,4}?\s+uit|(?:zet|schakel)(?:\s+\S+){0,4}?\s+uit"
     r"|kapat\w*|durdur\w*|iptal\w*|istemiyor\w*|istemem\w*|engelle\w*)(?![^\W\d_])",
     "off", True),
    (r"(?<![^\W\d_])(?:отключ|выключ|отпиш|прекрат|останов|убер|отмен|хватит|больше\s+не"
     r"|wyłącz|wylacz|wypisz|wypisa|вимкн|відпиш|відключ|припин|зупин"
     r"|vypn|vypnout|zru[šs]|odhl[aá][sš]|deaktivuj|p[řr]esta[nň]|zastavt|nechc|nezas[íi]l|nepos[íi]l"
     r"|u[žz]\s+nechc)\w*", "off", True),
    (r"\b(?:want\w*|would\s+like|'d\s+like|like\s+to|wish|prefer|please|send|resend|need"
     r"|bitte|möchte|moechte|hätte\s+gern|senden|schicken|zusenden|quiero|quisiera"
     r"|gustar[ií]a|env[ií]en\w*|enviar|mand[ae]n?|por\s+favor|prefiero|хочу|хотел\w*"
     r"|присылайте|присылать|отправляйте|пожалуйста|quero|gostaria|envie|enviem|prefiro|veux"
     r"|voudrais|souhaite|aimerais|envoyer|envoyez|s'il\s+vous\s+pla[iî]t|svp|pr[ée]f[eè]re"
     r"|voglio|vorrei|inviare|inviate|mandate|per\s+favore|chc[eę]|chciał\w*|wysyła\w*"
     r"|przysyła\w*|proszę|wil|graag|stuur|sturen|alstublieft|vill|skicka"
     r"|keep(?!\s+(?:on\s+)?(?:getting|receiving))|gardez|garder|behalten|behalte|mantener"
     r"|mantenga\w*|manter|mantenha\w*|оставьте|оставить|mantenere|mantieni|zachowaj|zostaw"
     r"|behouden|behåll|mandem|renvoy\w*|r[eé]exp[eé]di\w*|mandatemi|inviatemi|rimandat\w*"
     r"|верните|вернуть|istiyorum|isterim|g[öo]nderin\w*|надсилайте|надішліть"
     r"|будь\s+ласка|chci|chceme|cht[ěe]l\w*|pros[íi]m|pos[íi]lejte|zas[íi]lejte|po[šs]lete"
     r"|zas[íi]lat|pos[íi]lat)(?![^\W\d_])", "on", False),
    (r"\b(?:receiv\w*|get|getting|recib\w*|receb\w*|recevoir|reçevoir|получ\w*|erhalten"
     r"|bekommen|ricever\w*|otrzymywa\w*|dostawa\w*|ontvangen|krijgen|få|ta\s+emot"
     r"|отримува\w*|almak|dost[áa]vat|dostat|odeb[íi]rat|p[řr]ij[íi]mat)\b",
     None, False),
)
NEGATORS = frozenset(fold(w) for w in (
    "not", "never", "no", "dont", "doesnt", "wont", "cant", "nicht", "nie", "niemals", "kein",
    "keine", "keinen", "keiner", "nunca", "jamás", "ningún", "ninguna", "не", "ни", "никогда",
    "никаких", "não", "nao", "nem", "nenhum", "nenhuma", "ne", "n", "pas", "jamais", "aucun",
    "aucune", "non", "mai", "nessun", "nessuna", "nigdy", "żadnych", "żadnego", "niet", "geen",
    "nooit", "inte", "ej", "aldrig", "ingen", "inga", "instead", "statt", "anstatt", "вместо",
    "zamiast", "invece", "lieu", "plutôt", "plaats", "istället", "yerine", "замість", "didnt",
    "isnt", "arent", "wouldnt", "shouldnt", "couldnt", "havent"))
# Negations that sit right before the topic with no verb: "no promos", "keine Newsletter".
NEGATIVE_DETERMINERS = frozenset(fold(w) for w in (
    "no", "kein", "keine", "keinen", "keiner", "ningún", "ninguna", "ningunos", "никаких",
    "нет", "без", "nenhum", "nenhuma", "aucun", "aucune", "nessun", "nessuna", "żadnych",
    "żadnego", "geen", "inga", "ingen"))
# Requests asked as questions: a question with none of these ("Do you send SMS?") asks about
# the shop, and only an explicit verb ("can you turn off SMS?") reads as a change.
QUESTION_REQUEST = (
    r"\b(?:can|could|would|will|please|pls|könn\w*|kannst|bitte|pued\w*|podr[ií]\w*"
    r"|por\s+favor|pourr\w*|pouvez|peux|svp|s'il|pod(?:e|em|ia|eria\w*)|pot(?:ete|reste|resti)"
    r"|puoi|può|per\s+favore|можете|могли|можно|пожалуйста|może\w*|mogli\w*|proszę|kunnen"
    r"|kunt|kun|kan|kunde|snälla|lütfen|lutfen|можна|будь\s+ласка|m[ůu][žz]ete|mohl\w*"
    r"|pros[íi]m)\b")
# "plus de SMS" is "no more SMS" or "more SMS" depending on a sound French spelling does
# not carry; without a negation in front, the topic it names is left out.
AMBIGUOUS_BEFORE_TOPIC = r"\bplus\s+d(?:e|es|u|['’])\s*$"
# "unsubscribe me" with no topic named means the marketing list.
UNSUBSCRIBE = (r"\b(?:unsub\w*|opt(?:\s+me)?[\s-]?out|abbestel\w*|abmelden|d[eé]nme\s+de\s+baja"
               r"|dar(?:se|me)?\s+de\s+baja|desuscrib\w*|descadastr\w*|d[ée]sabonn\w*|d[ée]sinscri\w*|disiscriv\w*"
               r"|afmelden|uitschrijven|avregistrera|avprenumerera)\b"
               r"|(?<![^\W\d_])(?:отпиш|відпиш|wypisz|odhl[aá][sš])\w*")
LANGUAGE_KEYWORD = (r"language\w*|lang|locale|sprach\w*|idioma\w*|язык\w*|lingua|langue"
                    r"|jezyk\w*|taal|sprak\w*|mova|movy|movu|movi|movoiu|мов[аиуі]|мовою"
                    r"|dil|dili|dilini|dilin|dile|jazyk\w*")
SWITCH_VERB = (r"(?:switch|chang|set|put|mak|use|updat|umstell|stell|ander|wechsel|einstell"
               r"|cambi|pon|поменя|смен|измен|переключ|установ|постав|mud|alter|troc|pass|mett"
               r"|impost|zmien|ustaw|przelacz|wijzig|verander|zet|andra|byt|stall|змін|поміня"
               r"|встанов|yap|degistir|cevir|ayarla|zmen|prepn|nastav)\w*")
LANGUAGE_TARGET_PREPS = frozenset({"to", "into", "auf", "in", "a", "al", "на", "para", "en",
                                   "na", "naar", "till", "au", "pa", "em", "v"})
LANGUAGE_SOURCE_PREPS = frozenset(fold(w) for w in (
    "from", "von", "de", "del", "desde", "с", "со", "z", "ze", "van", "från", "da", "du",
    "depuis", "not", "nicht", "no", "не", "nie", "não", "pas", "instead", "statt", "anstatt",
    "dal", "dall", "do", "of"))
# (name reported back, regex): settings customers ask for that the shop does not offer.
UNSUPPORTED_SETTINGS: tuple[tuple[str, str], ...] = (
    ("dark mode", r"dark[\s-]*(?:mode|theme)|night\s+mode|dunkl\w*\s+(?:modus|design|theme)"
     r"|dunkelmodus|modo\s+oscuro|tema\s+oscuro|т[её]мн\w*\s+(?:тем|режим)\w*|ночн\w*\s+режим"
     r"|modo\s+escuro|tema\s+escuro|mode\s+sombre|th[eè]me\s+sombre|mode\s+nuit|tema\s+scuro"
     r"|modalit[aà]\s+scura|tryb\w*\s+ciemn\w*|ciemn\w*\s+motyw|donkere\s+modus|mörkt\s+läge"),
    ("high-contrast mode", r"high[\s-]*contrast|hohe\w*\s+kontrast|kontrastmodus|alto\s+contraste"
     r"|высок\w*\s+контраст\w*|contraste\s+[ée]lev[ée]|contrasto\s+elevato|wysoki\w*\s+kontrast\w*"
     r"|hoog\s+contrast|hög\s+kontrast"),
    ("two-factor authentication", r"two[\s-]*(?:factor|step)|\b2fa\b|\b2-?step|\bmfa\b"
     r"|multi[\s-]*factor|zwei[\s-]*faktor\w*|2-faktor\w*|dos\s+factores|doble\s+factor"
     r"|двухфактор\w*|двухэтап\w*|dois\s+fatores|deux\s+facteurs|double\s+authentification"
     r"|due\s+fattori|dwuskładnikow\w*|dwuetapow\w*|tweestaps\w*|twee-?factor\w*|tvåfaktor\w*"
     r"|tvåstegs\w*"),
    ("font size", r"font[\s-]*size|text\s+size|(?:bigger|larger|smaller)\s+(?:font|text)"
     r"|schriftgr(?:ö|oe|o)(?:ß|ss)e|tama[ñn]o\s+de\s+(?:la\s+)?(?:letra|fuente)"
     r"|размер\w*\s+шрифт\w*|tamanho\s+d[ao]\s+(?:letra|fonte)|taille\s+de\s+(?:la\s+)?police"
     r"|dimensione\s+del\s+carattere|rozmiar\w*\s+czcionki|lettergrootte|textstorlek"
     r"|teckenstorlek"),
    ("push notifications", r"push[\s-]*(?:notifications?|benachrichtigung\w*|уведомлен\w*"
     r"|powiadomien\w*|meldingen|notiser)|notificaciones\s+push|notificações\s+push"
     r"|notifications\s+push|пуш[\s-]*уведомлен\w*|notifiche\s+push|powiadomienia\s+push"),
    ("WhatsApp notifications", r"whats\s?app|вотсап|ватсап"),
    ("time zone", r"time[\s-]*zone|zeitzone|zona\s+horaria|часов\w*\s+пояс\w*|fuso\s+hor[aá]rio"
     r"|fuseau\s+horaire|fuso\s+orario|stref\w*\s+czasow\w*|tijdzone|tidszon"),
    ("currency", r"\bcurrency\b|\bw[äa]hrung\b|\bmoneda\b|\bвалют\w*|\bmoeda\b|\bdevise\b"
     r"|\bvaluta\b|\bwalut\w*"),
)
