"""A fixed probe set: real sentences in several scripts, for checking a converted model against torch.

Articles 1 and 3 of the Universal Declaration of Human Rights in the United Nations' official
translations (Latin, Cyrillic, Han, Arabic, Devanagari, Japanese, Hangul, Greek, Hebrew, Thai),
plus longer sentences of the same texts, so that both short and long passes are compared. Kept in
the package, so that the check at conversion needs no data download.
"""

PROBE_SENTENCES = (
    "All human beings are born free and equal in dignity and rights. They are endowed with reason and "
    "conscience and should act towards one another in a spirit of brotherhood.",
    "Everyone has the right to life, liberty and security of person.",
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
    "begabt und sollen einander im Geist der Brüderlichkeit begegnen.",
    "Jeder hat das Recht auf Leben, Freiheit und Sicherheit der Person.",
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison et "
    "de conscience et doivent agir les uns envers les autres dans un esprit de fraternité.",
    "Tout individu a droit à la vie, à la liberté et à la sûreté de sa personne.",
    "Todos los seres humanos nacen libres e iguales en dignidad y derechos y, dotados como están de razón "
    "y conciencia, deben comportarse fraternalmente los unos con los otros.",
    "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены разумом и совестью "
    "и должны поступать в отношении друг друга в духе братства.",
    "Каждый человек имеет право на жизнь, на свободу и на личную неприкосновенность.",
    "人人生而自由,在尊严和权利上一律平等。他们赋有理性和良心,并应以兄弟关系的精神相对待。",
    "人人有权享有生命、自由和人身安全。",
    "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق. وقد وهبوا عقلاً وضميرًا وعليهم أن يعامل بعضهم بعضًا بروح الإخاء.",
    "لكل فرد الحق في الحياة والحرية وسلامة شخصه.",
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। उन्हें बुद्धि और "
    "अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए।",
    "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。人間は、理性と良心とを"
    "授けられており、互いに同胞の精神をもって行動しなければならない。",
    "すべて人は、生命、自由及び身体の安全に対する権利を有する。",
    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다. 인간은 천부적으로 이성과 양심을 "
    "부여받았으며 서로 형제애의 정신으로 행동하여야 한다.",
    "모든 사람은 생명과 신체의 자유와 안전에 대한 권리를 가진다.",
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα. Είναι προικισμένοι "
    "με λογική και συνείδηση, και οφείλουν να συμπεριφέρονται μεταξύ τους με πνεύμα αδελφοσύνης.",
    "כל בני אדם נולדו בני חורין ושווים בערכם ובזכויותיהם. כולם חוננו בתבונה ובמצפון, לפיכך חובה עליהם "
    "לנהוג איש ברעהו ברוח של אחוה.",
    "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักดิ์และสิทธิ ต่างมีเหตุผลและมโนธรรม "
    "และควรปฏิบัติต่อกันด้วยเจตนารมณ์แห่งภราดรภาพ",
    "Tutti gli esseri umani nascono liberi ed eguali in dignità e diritti.",
    "Wszyscy ludzie rodzą się wolni i równi pod względem swej godności i swych praw.",
    "Tüm insanlar hür, haysiyet ve haklar bakımından eşit doğarlar.",
)
